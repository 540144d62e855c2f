package autocert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/object-store-operator/operator/internal/controller"
)

const (
	// ManagedByLabel marks what the operator created; a Secret without it
	// is never overwritten.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "object-store-operator"
	// CSRAnnotation on the Secret names the CSR its certificate came from.
	CSRAnnotation = "aistor.min.io/csr"
	// SignerAnnotation on the Secret names the signer.
	SignerAnnotation = "aistor.min.io/signer"
	// DefaultSigner signs the serving certificate unless configured otherwise.
	DefaultSigner = certificatesv1.KubeletServingSignerName
	// EKSSigner is the signer EKS provides for non-kubelet serving certificates.
	EKSSigner = "beta.eks.amazonaws.com/app-serving"
)

// IssuerConfig configures the CSR flow.
type IssuerConfig struct {
	Client  kubernetes.Interface
	Secrets coreinformers.SecretInformer // over Namespace
	// Namespace and SecretName locate object-store-operator-tls.
	Namespace, SecretName string
	// DNSNames go into the CSR; the first is also in the CN.
	DNSNames []string
	// IPAddresses go into the CSR too, for pods that reach the upgrade
	// server by address.
	IPAddresses []net.IP
	SignerName  string
	// Approve files the approval itself; off for clusters where an admin
	// or a policy engine approves.
	Approve bool
	// Timeout bounds one attempt: filing, approval and signing.
	Timeout time.Duration
	// Expiration is the requested lifetime (spec.expirationSeconds, >= 10m).
	Expiration time.Duration
	// RenewBefore renews this long before expiry; 0 means a third of the
	// certificate's lifetime.
	RenewBefore time.Duration
	// ServingCASecret, if set, names a Secret whose ca.crt is the bundle
	// pods must trust, overriding what the operator works out.
	ServingCASecret string
	// ClusterCA is the fallback bundle when the CSR status has no chain
	// and the kube-root-ca.crt ConfigMap cannot be read.
	ClusterCA []byte
	Validator Validator
	Clock     clock.WithTicker
	Metrics   *Metrics
	Log       zerolog.Logger
}

// Issuer keeps Secret object-store-operator-tls filled with a certificate
// from the Kubernetes CSR API and renews it. Only the leader runs it; every
// replica serves the Secret through a SecretSource.
type Issuer struct {
	cfg    IssuerConfig
	log    zerolog.Logger
	lister corelisters.SecretLister
	synced cache.InformerSynced
	// queue belongs to the current leadership term: a shut-down queue
	// cannot be reused, and a replica may lead again later.
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[string]]
	// foreign remembers the Secret version already reported as not ours.
	foreign string
}

// NewIssuer returns an Issuer; call Run on the leader.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Validator.Now == nil {
		cfg.Validator.Now = cfg.Clock.Now
	}
	i := &Issuer{
		cfg:    cfg,
		log:    cfg.Log.With().Str("component", "autocert").Str("secret", cfg.Namespace+"/"+cfg.SecretName).Str("signer", cfg.SignerName).Logger(),
		lister: cfg.Secrets.Lister(),
		synced: cfg.Secrets.Informer().HasSynced,
	}
	_, err := cfg.Secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    i.enqueue,
		UpdateFunc: func(_, obj any) { i.enqueue(obj) },
		DeleteFunc: i.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("watch Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	return i, nil
}

func (i *Issuer) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*corev1.Secret); ok && s.Namespace == i.cfg.Namespace && s.Name == i.cfg.SecretName {
		if q := i.queue.Load(); q != nil {
			(*q).Add(s.Name)
		}
	}
}

// Run issues and renews until ctx ends (leadership lost or shutdown).
func (i *Issuer) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), i.synced) {
		return fmt.Errorf("autocert: Secret informer did not sync")
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		// A failed CSR is retried from 5 s, doubling up to 5 min.
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "autocert", Clock: i.cfg.Clock})
	i.queue.Store(&q)
	defer i.queue.Store(nil)
	q.Add(i.cfg.SecretName)
	// Failures are logged by issue itself, with the CSR and the remedy.
	controller.Run(ctx, q, 1, i.sync, nil)
	return nil
}

// sync makes sure the Secret holds a valid certificate of ours that is not
// due for renewal, filing a CSR otherwise, and schedules the next look at
// the renewal time.
func (i *Issuer) sync(ctx context.Context, key string) error {
	secret, err := i.lister.Secrets(i.cfg.Namespace).Get(key)
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return fmt.Errorf("get Secret %s/%s: %w", i.cfg.Namespace, key, err)
	}
	if secret != nil && secret.Labels[ManagedByLabel] != ManagedByValue {
		if i.foreign != secret.ResourceVersion {
			i.foreign = secret.ResourceVersion
			i.log.Error().Str("reason", "Secret exists and was not created by the operator").
				Msgf("autocert will not overwrite Secret %s/%s (it lacks the label %s=%s; cert-manager may manage it). "+
					"To serve it, set OPERATOR_AUTO_CERT_DISABLED=on and OPERATOR_CUSTOM_TLS_SECRET_NAME=%s; "+
					"to let autocert manage it, delete it", i.cfg.Namespace, key, ManagedByLabel, ManagedByValue, key)
		}
		// Nothing to retry: the next change to the Secret brings us back.
		return nil
	}

	reason := "no certificate yet"
	if secret != nil {
		_, _, cert, err := KeyPairFromSecret(secret)
		if err == nil {
			err = i.cfg.Validator.Validate(cert)
		}
		if err == nil {
			// The names asked for may have changed since it was issued.
			err = i.covers(cert.Leaf)
		}
		if err == nil {
			renewAt := i.renewAt(cert.Leaf)
			if wait := renewAt.Sub(i.cfg.Clock.Now()); wait > 0 {
				i.log.Debug().Time("renewAt", renewAt).Msg("serving certificate current; next check at renewal time")
				if q := i.queue.Load(); q != nil {
					(*q).AddAfter(key, wait)
				}
				return nil
			}
			reason = "due for renewal"
		} else {
			reason = "unusable: " + err.Error()
		}
	}
	i.log.Info().Str("reason", reason).Msg("requesting a serving certificate from the Kubernetes CSR API")
	return i.issue(ctx, secret)
}

func (i *Issuer) renewAt(leaf *x509.Certificate) time.Time {
	before := i.cfg.RenewBefore
	if before <= 0 {
		before = leaf.NotAfter.Sub(leaf.NotBefore) / 3
	}
	return leaf.NotAfter.Add(-before)
}

// issue files a CSR, has it approved and signed, and stores the result.
func (i *Issuer) issue(ctx context.Context, existing *corev1.Secret) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		// What the kubelet-serving signer insists on.
		Subject:     pkix.Name{CommonName: "system:node:" + i.cfg.DNSNames[0], Organization: []string{"system:nodes"}},
		DNSNames:    i.cfg.DNSNames,
		IPAddresses: i.cfg.IPAddresses,
	}, key)
	if err != nil {
		return fmt.Errorf("create certificate request: %w", err)
	}
	seconds := int32(i.cfg.Expiration / time.Second)
	csr, err := i.cfg.Client.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ManagedByValue + "-" + i.cfg.Namespace + "-",
			Labels:       map[string]string{ManagedByLabel: ManagedByValue},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        i.cfg.SignerName,
			ExpirationSeconds: &seconds,
			Usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		i.cfg.Metrics.csrOutcomes.WithLabelValues("error").Inc()
		return i.fail("", fmt.Errorf("create CertificateSigningRequest: %w", err))
	}
	log := i.log.With().Str("csr", csr.Name).Logger()
	log.Info().Strs("dnsNames", i.cfg.DNSNames).Int32("expirationSeconds", seconds).Msg("CertificateSigningRequest created")

	if i.cfg.Approve {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: "ObjectStoreOperatorSelfApproval", Message: "the object-store operator approves its own upgrade-server certificate",
		})
		if _, err := i.cfg.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			i.cfg.Metrics.csrOutcomes.WithLabelValues("error").Inc()
			return i.fail(csr.Name, fmt.Errorf("approve: %w (the operator needs update on certificatesigningrequests/approval and approve on signers/%s)", err, i.cfg.SignerName))
		}
	} else {
		log.Info().Msg("waiting for someone else to approve the CSR (OPERATOR_AUTOCERT_APPROVE=off): kubectl certificate approve " + csr.Name)
	}

	chainPEM, err := i.waitSigned(ctx, csr)
	if err != nil {
		return i.fail(csr.Name, err)
	}
	chain, err := parseChain(chainPEM)
	if err == nil {
		err = i.matches(chain[0], key)
	}
	if err != nil {
		i.cfg.Metrics.csrOutcomes.WithLabelValues("failed").Inc()
		return i.fail(csr.Name, fmt.Errorf("signed certificate does not match the request: %w", err))
	}
	i.cfg.Metrics.csrOutcomes.WithLabelValues("issued").Inc()

	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	ca := i.caBundle(ctx, chain)
	if err := i.store(ctx, existing, csr.Name, chainPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), ca); err != nil {
		return err
	}
	log.Info().Str("serial", chain[0].SerialNumber.Text(16)).Time("notAfter", chain[0].NotAfter).
		Time("renewAt", i.renewAt(chain[0])).Msg("serving certificate issued and stored")
	return nil
}

// fail logs a CSR failure the way an SRE needs it: which CSR, which
// signer, why, and what to do instead.
func (i *Issuer) fail(csr string, err error) error {
	ev := i.log.Error().Str("reason", err.Error())
	if csr != "" {
		ev = ev.Str("csr", csr)
	}
	ev.Msg("autocert could not get a serving certificate; retrying with backoff. If the signer does not sign " +
		"(not kubernetes.io/kubelet-serving-capable, EKS, or approvals are blocked), set OPERATOR_CSR_SIGNER_NAME, " +
		"or use a custom certificate: OPERATOR_AUTO_CERT_DISABLED=on and OPERATOR_CUSTOM_TLS_SECRET_NAME=<secret>")
	return err
}

// waitSigned watches the CSR until it carries a certificate, is denied or
// failed, or the attempt times out. Each round reads the CSR first (its
// state and a fresh resource version) and then watches from there; rounds
// are spaced 100 ms doubling to 5 s, so a watch that fails at once (410
// Gone after a compaction, an apiserver restarting) never becomes a tight
// loop against the apiserver.
func (i *Issuer) waitSigned(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, i.cfg.Timeout)
	defer cancel()
	api := i.cfg.Client.CertificatesV1().CertificateSigningRequests()
	backoff := 100 * time.Millisecond
	for {
		cur, err := api.Get(ctx, csr.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			if cert, done, err := i.csrState(cur); done {
				return cert, err
			}
			w, werr := api.Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", csr.Name).String(),
				ResourceVersion: cur.ResourceVersion,
			})
			if werr == nil {
				cert, done, err := i.consume(ctx, w)
				w.Stop()
				if done {
					return cert, err
				}
			}
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("CSR %s was deleted while waiting for it", csr.Name)
		}
		select {
		case <-ctx.Done():
			return nil, i.timedOut(csr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// consume reads watch events until the CSR is done, the watch ends or
// reports an error (the caller reads the CSR again), or ctx ends.
func (i *Issuer) consume(ctx context.Context, w watch.Interface) ([]byte, bool, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, false, nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil, false, nil
			}
			got, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok {
				continue
			}
			if cert, done, err := i.csrState(got); done {
				return cert, true, err
			}
		}
	}
}

// csrState tells whether the CSR is done: signed (its certificate), denied
// or failed (an error).
func (i *Issuer) csrState(got *certificatesv1.CertificateSigningRequest) ([]byte, bool, error) {
	for _, c := range got.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied:
			i.cfg.Metrics.csrOutcomes.WithLabelValues("denied").Inc()
			return nil, true, fmt.Errorf("CSR %s was denied (reason %q: %s)", got.Name, c.Reason, c.Message)
		case certificatesv1.CertificateFailed:
			i.cfg.Metrics.csrOutcomes.WithLabelValues("failed").Inc()
			return nil, true, fmt.Errorf("signer %s failed CSR %s (reason %q: %s)", got.Spec.SignerName, got.Name, c.Reason, c.Message)
		}
	}
	if len(got.Status.Certificate) > 0 {
		return got.Status.Certificate, true, nil
	}
	return nil, false, nil
}

func (i *Issuer) timedOut(csr *certificatesv1.CertificateSigningRequest) error {
	i.cfg.Metrics.csrOutcomes.WithLabelValues("timeout").Inc()
	state := "approved but not signed: no controller signs for this signer"
	if !i.cfg.Approve {
		state = "not approved (OPERATOR_AUTOCERT_APPROVE=off) or approved but not signed"
	}
	return fmt.Errorf("CSR %s for signer %s not signed within %s: %s", csr.Name, i.cfg.SignerName, i.cfg.Timeout, state)
}

func (i *Issuer) matches(leaf *x509.Certificate, key *ecdsa.PrivateKey) error {
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return errors.New("its public key is not the one requested")
	}
	return i.covers(leaf)
}

// covers checks that leaf is valid for every name and address requested.
func (i *Issuer) covers(leaf *x509.Certificate) error {
	names := slices.Clone(i.cfg.DNSNames)
	for _, ip := range i.cfg.IPAddresses {
		names = append(names, ip.String())
	}
	for _, name := range names {
		if err := leaf.VerifyHostname(name); err != nil {
			return fmt.Errorf("it does not cover %s (SANs %s)", name, describeSANs(leaf))
		}
	}
	return nil
}

// caBundle works out what pods must trust: the override Secret, else the
// chain the signer returned beyond the leaf, else the cluster CA.
func (i *Issuer) caBundle(ctx context.Context, chain []*x509.Certificate) []byte {
	if i.cfg.ServingCASecret != "" {
		if ca := servingCAOverride(i.lister, i.cfg.Namespace, i.cfg.ServingCASecret); len(ca) > 0 {
			return ca
		}
		i.log.Warn().Str("caSecret", i.cfg.ServingCASecret).Msg("OPERATOR_SERVING_CA_SECRET missing or without ca.crt; working out the CA instead")
	}
	if len(chain) > 1 {
		var out []byte
		for _, c := range chain[1:] {
			out = append(out, pemCert(c.Raw)...)
		}
		return out
	}
	cm, err := i.cfg.Client.CoreV1().ConfigMaps(i.cfg.Namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err == nil && cm.Data[KeyCA] != "" {
		return []byte(cm.Data[KeyCA])
	}
	return i.cfg.ClusterCA
}

func (i *Issuer) store(ctx context.Context, existing *corev1.Secret, csrName string, certPEM, keyPEM, ca []byte) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: i.cfg.SecretName, Namespace: i.cfg.Namespace},
		Type:       corev1.SecretTypeTLS,
	}
	if existing != nil {
		secret = existing.DeepCopy()
	}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Labels[ManagedByLabel] = ManagedByValue
	secret.Annotations[CSRAnnotation] = csrName
	secret.Annotations[SignerAnnotation] = i.cfg.SignerName
	secret.Data = map[string][]byte{KeyTLSCert: certPEM, KeyTLSKey: keyPEM, KeyCA: ca}
	api := i.cfg.Client.CoreV1().Secrets(i.cfg.Namespace)
	var err error
	if existing == nil {
		_, err = api.Create(ctx, secret, metav1.CreateOptions{})
	} else {
		_, err = api.Update(ctx, secret, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("store certificate in Secret %s/%s: %w", i.cfg.Namespace, i.cfg.SecretName, err)
	}
	return nil
}

func parseChain(data []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse issued certificate: %w", err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, errors.New("no certificate in the CSR status")
	}
	return chain, nil
}

// DetectSigner returns EKSSigner on EKS (told by its node labels or
// kubelet versions) and DefaultSigner elsewhere, including when the
// operator may not list nodes. An apiserver that does not answer is asked
// again (1 s doubling to 30 s) until it does or ctx ends: a guess made
// during an outage would last for the life of the process.
func DetectSigner(ctx context.Context, client kubernetes.Interface, log zerolog.Logger) string {
	return detectSigner(ctx, client, log, time.Second)
}

func detectSigner(ctx context.Context, client kubernetes.Interface, log zerolog.Logger, backoff time.Duration) string {
	var nodes *corev1.NodeList
	for {
		var err error
		nodes, err = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 5})
		if err == nil {
			break
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
			log.Debug().Err(err).Msg("cannot list nodes to detect EKS; using " + DefaultSigner)
			return DefaultSigner
		}
		log.Warn().Err(err).Dur("retryIn", backoff).Msg("cannot reach the apiserver to detect the CSR signer; retrying")
		select {
		case <-ctx.Done():
			return DefaultSigner
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	for _, n := range nodes.Items {
		_, group := n.Labels["eks.amazonaws.com/nodegroup"]
		_, compute := n.Labels["eks.amazonaws.com/compute-type"]
		if group || compute || strings.Contains(n.Status.NodeInfo.KubeletVersion, "-eks-") {
			log.Info().Str("node", n.Name).Msg("EKS detected: using signer " + EKSSigner)
			return EKSSigner
		}
	}
	return DefaultSigner
}
