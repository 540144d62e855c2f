package autocert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	csrutil "k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/reason"
)

const (
	// ManagedByLabel marks what the operator created; a Secret without it
	// is never overwritten.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "object-store-operator"
	// NamespaceLabel on a CSR names the namespace of the operator that
	// filed it: each installation cleans up only its own.
	NamespaceLabel = "aistor.min.io/operator-namespace"
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
	// Reasons words what the user can do about a problem (autocert's
	// Reasons, spelled); nil: generic words.
	Reasons reason.Set
	Clock   clock.WithTicker
	Metrics *Metrics
	Log     zerolog.Logger
}

// Issuer keeps Secret object-store-operator-tls filled with a certificate
// from the Kubernetes CSR API and renews it. It runs on every replica and
// acts only while leading (Lead); every replica serves the Secret through
// a SecretSource.
type Issuer struct {
	cfg    IssuerConfig
	log    zerolog.Logger
	lister corelisters.SecretLister
	synced cache.InformerSynced
	queue  *controller.Queue
	// foreign remembers the Secret version already reported as not ours.
	foreign string
}

// standAside reports, once per version of the Secret, that another issuer
// wrote it and autocert leaves it alone: no CSR, no write. What is served
// stays (the SecretSource refuses the other certificate by the same rule).
func (i *Issuer) standAside(secret *corev1.Secret, foreign Foreign, detail string) {
	i.cfg.Metrics.foreign.Reset()
	i.cfg.Metrics.foreign.WithLabelValues(foreign.Label()).Set(1)
	if i.foreign == secret.ResourceVersion {
		return
	}
	i.foreign = secret.ResourceVersion
	fix := strings.ReplaceAll(remedy(i.cfg.Reasons, ReasonForeignSecret,
		"Serve it as a custom certificate, or stop whatever writes it and delete it to let autocert manage it"), "<secret>", secret.Name)
	i.log.Error().Str("namespace", secret.Namespace).Str("name", secret.Name).
		Str("reason", string(foreign)).Str("detail", detail).Str("remedy", fix).
		Msgf("autocert will not overwrite Secret %s/%s: %s; it issues nothing and keeps serving the certificate it served. %s",
			secret.Namespace, secret.Name, detail, fix)
}

// NewIssuer returns an Issuer; it needs leadership: Run it once per
// leadership term (controller.Manager).
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
		queue: controller.NewQueue(
			// A failed CSR is retried from 5 s, doubling up to 5 min.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "autocert", Clock: cfg.Clock}),
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
	obj = controller.Unwrap(obj)
	if s, ok := obj.(*corev1.Secret); ok && s.Namespace == i.cfg.Namespace && s.Name == i.cfg.SecretName {
		i.queue.Add(s.Name)
	}
}

// NeedLeaderElection is true: only the leader files CSRs and writes the
// Secret.
func (i *Issuer) NeedLeaderElection() bool { return true }

// Run issues and renews until ctx (the leadership term) ends. It first
// deletes the CSRs an earlier term or process of this installation left
// behind (killed mid-attempt): none of them will be used.
func (i *Issuer) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), i.synced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("autocert: Secret informer did not sync")
	}
	i.deleteLeftoverCSRs(ctx)
	i.queue.Add(i.cfg.SecretName)
	// Failures are logged by issue itself, with the CSR and the remedy.
	controller.Run(ctx, i.queue, 1, i.sync, nil)
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
	if foreign, detail := Ownership(secret); foreign != Owned {
		i.standAside(secret, foreign, detail)
		// Nothing to retry: the next change to the Secret brings us back.
		return nil
	}
	i.cfg.Metrics.foreign.Reset()

	reason := "no certificate yet"
	if secret != nil {
		_, _, cert, err := pemutil.KeyPairFromSecret(secret)
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
				i.queue.AddAfter(key, wait)
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
	// The subject is what the kubelet-serving signer insists on.
	request, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + i.cfg.DNSNames[0], Organization: []string{"system:nodes"}},
		i.cfg.DNSNames, i.cfg.IPAddresses)
	if err != nil {
		return fmt.Errorf("create certificate request: %w", err)
	}
	seconds := int32(i.cfg.Expiration / time.Second)
	csr, err := i.cfg.Client.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ManagedByValue + "-" + i.cfg.Namespace + "-",
			Labels:       map[string]string{ManagedByLabel: ManagedByValue, NamespaceLabel: i.cfg.Namespace},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           request,
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
	// Issued, refused or timed out, this CSR is not needed once the
	// attempt ends: the certificate lives in the Secret.
	defer i.deleteCSR(ctx, csr.Name)

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
		log.Info().Msg("waiting for someone else to approve the CSR (" +
			remedy(i.cfg.Reasons, ReasonAwaitingApproval, "self-approval off") + "): kubectl certificate approve " + csr.Name)
	}

	chainPEM, err := i.waitSigned(ctx, csr)
	if err != nil {
		return i.fail(csr.Name, err)
	}
	chain, err := certutil.ParseCertsPEM(chainPEM)
	if err == nil {
		err = i.matches(chain[0], key)
	}
	if err != nil {
		i.cfg.Metrics.csrOutcomes.WithLabelValues("failed").Inc()
		return i.fail(csr.Name, fmt.Errorf("signed certificate does not match the request: %w", err))
	}
	i.cfg.Metrics.csrOutcomes.WithLabelValues("issued").Inc()

	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	ca := i.caBundle(ctx, chain)
	if stored, err := i.store(ctx, existing, csr.Name, chainPEM, keyPEM, ca); err != nil || !stored {
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
	ev.Msg("autocert could not get a serving certificate; retrying with backoff. " +
		remedy(i.cfg.Reasons, ReasonCSRFailed, "If the signer does not sign, choose another signer or serve a custom certificate"))
	return err
}

// waitSigned waits for the CSR to carry a certificate, be denied or
// failed, or the attempt to time out. client-go's WaitForCertificate
// watches through an informer, whose reflector backs off when a watch
// fails (410 Gone after a compaction, an apiserver restarting). Its errors
// are generic, so the CSR is read once more to say why in the log and the
// metrics.
func (i *Issuer) waitSigned(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	waitCtx, cancel := context.WithTimeout(ctx, i.cfg.Timeout)
	defer cancel()
	cert, err := csrutil.WaitForCertificate(waitCtx, i.cfg.Client, csr.Name, csr.UID)
	if err == nil {
		return cert, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the term or the process ended
	}
	cur, gerr := i.cfg.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(gerr):
		return nil, fmt.Errorf("CSR %s was deleted while waiting for it", csr.Name)
	case gerr == nil && cur.UID == csr.UID:
		if cert, done, serr := i.csrState(cur); done {
			return cert, serr
		}
	}
	if waitCtx.Err() != nil {
		return nil, i.timedOut(csr)
	}
	return nil, fmt.Errorf("wait for CSR %s: %w", csr.Name, err)
}

// deleteCSR removes a CSR this operator filed; the cluster's CSR cleaner
// (an hour after issuance, a day when pending) is the backstop when it
// cannot.
func (i *Issuer) deleteCSR(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := i.cfg.Client.CertificatesV1().CertificateSigningRequests().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		i.log.Warn().Str("csr", name).Err(err).Msg("could not delete a CSR the operator no longer needs; the cluster's CSR cleaner removes it later")
		return
	}
	i.log.Debug().Str("csr", name).Msg("CSR deleted: no longer needed")
}

// deleteLeftoverCSRs deletes the CSRs this installation filed that no
// attempt waits for.
func (i *Issuer) deleteLeftoverCSRs(ctx context.Context) {
	list, err := i.cfg.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue, NamespaceLabel: i.cfg.Namespace}).String(),
	})
	if err != nil {
		i.log.Warn().Err(err).Msg("could not list leftover CSRs; the cluster's CSR cleaner removes them later")
		return
	}
	for _, c := range list.Items {
		i.deleteCSR(ctx, c.Name)
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
		state = "not approved (approval is left to an admin or a policy engine) or approved but not signed"
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
		i.log.Warn().Str("caSecret", i.cfg.Namespace+"/"+i.cfg.ServingCASecret).Str("reason", "missing or without ca.crt").
			Msg("serving CA Secret unusable; working out the CA instead")
	}
	if len(chain) > 1 {
		var out []byte
		for _, c := range chain[1:] {
			out = append(out, pemCert(c.Raw)...)
		}
		return out
	}
	cm, err := i.cfg.Client.CoreV1().ConfigMaps(i.cfg.Namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err == nil && cm.Data[pemutil.KeyCA] != "" {
		return []byte(cm.Data[pemutil.KeyCA])
	}
	return i.cfg.ClusterCA
}

// store writes the certificate into the Secret, recording its fingerprint
// (Ownership). It reports false, and no error, when the Secret changed
// since it was read: whoever wrote it is not overwritten.
func (i *Issuer) store(ctx context.Context, existing *corev1.Secret, csrName string, certPEM, keyPEM, ca []byte) (bool, error) {
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
	secret.Annotations[FingerprintAnnotation] = fingerprintPEM(certPEM)
	secret.Data = map[string][]byte{pemutil.KeyTLSCert: certPEM, pemutil.KeyTLSKey: keyPEM, pemutil.KeyCA: ca}
	api := i.cfg.Client.CoreV1().Secrets(i.cfg.Namespace)
	var err error
	if existing == nil {
		_, err = api.Create(ctx, secret, metav1.CreateOptions{})
	} else {
		_, err = api.Update(ctx, secret, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Someone wrote the Secret while the certificate was being issued
		// (cert-manager, say): nothing is overwritten. That write's
		// informer event brings the Secret back to be decided again, once
		// the cache holds it; queueing it here could decide on the stale
		// cache and file another CSR.
		i.log.Info().Str("reason", err.Error()).Msg("the Secret changed while autocert was issuing; the certificate is dropped and the Secret decided again")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store certificate in Secret %s/%s: %w", i.cfg.Namespace, i.cfg.SecretName, err)
	}
	return true, nil
}
