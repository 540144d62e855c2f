package autocert

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/testutil"

	"github.com/object-store-operator/operator/internal/reason/reasontest"
)

const tlsSecret = "object-store-operator-tls"

// issuerFixture is an Issuer over a fake clientset whose Secret informer
// is preloaded by hand (never started), leading, with its API actions
// cleared so a test sees only what one sync does. The clientset behaves
// like an apiserver where it matters to the issuer: CSRs get a name from
// generateName and a UID; hooks stand in for whoever approves, denies or
// signs.
type issuerFixture struct {
	issuer  *Issuer
	cs      *fake.Clientset
	logs    *testutil.LockedBuffer
	metrics *Metrics
	ca      *testutil.CA
	// created is the last CSR filed, as the apiserver stored it.
	created *certificatesv1.CertificateSigningRequest
}

func newIssuerFixture(t *testing.T, tweak func(*IssuerConfig), objs ...runtime.Object) *issuerFixture {
	t.Helper()
	f := &issuerFixture{cs: testutil.Clientset(objs...), logs: &testutil.LockedBuffer{}, metrics: NewMetrics(nil),
		ca: testutil.NewCA(t, "kubelet-serving CA")}

	created := 0
	f.cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		created++
		csr.Name = csr.GenerateName + strconv.Itoa(created)
		csr.UID = types.UID("uid-" + csr.Name)
		f.created = csr
		return false, nil, nil // stored by the tracker, as modified here
	})

	factory := informers.NewSharedInformerFactoryWithOptions(f.cs, 0, informers.WithNamespace("ops"))
	cfg := IssuerConfig{
		Client: f.cs, Secrets: factory.Core().V1().Secrets(), Namespace: "ops", SecretName: tlsSecret,
		DNSNames: []string{svcName}, SignerName: DefaultSigner, Approve: true, Timeout: 5 * time.Second,
		Expiration: 90 * time.Hour, Validator: Validator{DNSName: svcName}, Metrics: f.metrics,
		Reasons: reasontest.Spelled(t, Reasons(), "OPERATOR_"), Log: zerolog.New(f.logs),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	var err error
	f.issuer, err = NewIssuer(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			require.NoError(t, factory.Core().V1().Secrets().Informer().GetIndexer().Add(s))
		}
	}
	f.cs.ClearActions()
	return f
}

// onApproval runs do on the CSR as the approval is written, as
// kube-controller-manager's signer would right after it.
func (f *issuerFixture) onApproval(do func(*certificatesv1.CertificateSigningRequest)) {
	f.cs.PrependReactor("update", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "approval" {
			do(a.(k8stesting.UpdateAction).GetObject().(*certificatesv1.CertificateSigningRequest))
		}
		return false, nil, nil
	})
}

// onCreate runs do on the CSR as it is created: a policy engine that
// decides at once.
func (f *issuerFixture) onCreate(do func(*certificatesv1.CertificateSigningRequest)) {
	f.cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		do(a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest))
		return false, nil, nil
	})
}

// signWith returns a signer that issues the requested names for key (the
// requested key when nil), optionally followed by the CA in the chain.
func (f *issuerFixture) signWith(t *testing.T, key crypto.PublicKey, withChain bool) func(*certificatesv1.CertificateSigningRequest) {
	return func(csr *certificatesv1.CertificateSigningRequest) {
		block, _ := pem.Decode(csr.Spec.Request)
		require.NotNil(t, block, "the CSR's request is PEM")
		req, err := x509.ParseCertificateRequest(block.Bytes)
		require.NoError(t, err)
		require.NoError(t, req.CheckSignature(), "the request is signed by its key")
		pub := key
		if pub == nil {
			pub = req.PublicKey
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: req.Subject,
			DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Duration(*csr.Spec.ExpirationSeconds) * time.Second),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca.Cert, pub, f.ca.Key)
		require.NoError(t, err)
		csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if withChain {
			csr.Status.Certificate = append(csr.Status.Certificate, f.ca.PEM...)
		}
	}
}

// writes are the sync's API actions that change something, as
// "verb resource[/subresource]".
func (f *issuerFixture) writes() []string {
	var out []string
	for _, a := range f.cs.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		r := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		out = append(out, r)
	}
	return out
}

func (f *issuerFixture) createdCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	require.NotNil(t, f.created, "no CSR was created")
	return f.created
}

func (f *issuerFixture) csrsLeft(t *testing.T) int {
	t.Helper()
	list, err := f.cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return len(list.Items)
}

func (f *issuerFixture) storedSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := f.cs.CoreV1().Secrets("ops").Get(context.Background(), tlsSecret, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func (f *issuerFixture) outcome(label string) float64 {
	return promtest.ToFloat64(f.metrics.csrOutcomes.WithLabelValues(label))
}

func rootCA(pemData []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ops"}, Data: map[string]string{pemutil.KeyCA: string(pemData)}}
}

// managedSecret is the Secret as autocert stores p: labelled, with the
// certificate's fingerprint recorded.
func managedSecret(p pair) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops", ResourceVersion: "3",
		Labels:      map[string]string{ManagedByLabel: ManagedByValue},
		Annotations: map[string]string{CSRAnnotation: "csr-1", FingerprintAnnotation: fingerprintPEM(p.cert)}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": p.cert, "tls.key": p.key}}
}

func TestIssuerFilesApprovesAndStoresACertificate(t *testing.T) {
	f := newIssuerFixture(t, nil)
	f.onApproval(f.signWith(t, nil, false))
	// The signer returns the leaf alone: ca.crt comes from kube-root-ca.crt.
	_, err := f.cs.CoreV1().ConfigMaps("ops").Create(context.Background(), rootCA(f.ca.PEM), metav1.CreateOptions{})
	require.NoError(t, err)
	f.cs.ClearActions()

	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

	assert.Equal(t, []string{
		"create certificatesigningrequests",
		"update certificatesigningrequests/approval",
		"create secrets",
		"delete certificatesigningrequests",
	}, f.writes(), "file, approve, store, clean up: nothing else")

	csr := f.createdCSR(t)
	assert.Equal(t, DefaultSigner, csr.Spec.SignerName)
	assert.Equal(t, map[string]string{ManagedByLabel: ManagedByValue, NamespaceLabel: "ops"}, csr.Labels,
		"labelled so kubectl get csr -l and the installation's clean-up find it")
	assert.Equal(t, int32(90*3600), *csr.Spec.ExpirationSeconds)
	assert.ElementsMatch(t, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment,
		certificatesv1.UsageServerAuth}, csr.Spec.Usages, "what the kubelet-serving signer accepts")
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, "system:node:"+svcName, req.Subject.CommonName, "the kubelet-serving signer's subject")
	assert.Equal(t, []string{"system:nodes"}, req.Subject.Organization)
	assert.Equal(t, []string{svcName}, req.DNSNames)

	secret := f.storedSecret(t)
	assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
	assert.Equal(t, ManagedByValue, secret.Labels[ManagedByLabel])
	assert.Equal(t, csr.Name, secret.Annotations[CSRAnnotation])
	assert.Equal(t, DefaultSigner, secret.Annotations[SignerAnnotation])
	assert.Equal(t, fingerprintPEM(secret.Data[pemutil.KeyTLSCert]), secret.Annotations[FingerprintAnnotation],
		"the fingerprint of the certificate stored, so another writer's is recognised")
	_, _, cert, err := pemutil.KeyPairFromSecret(secret)
	require.NoError(t, err, "tls.crt and tls.key are a pair")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(secret.Data[pemutil.KeyCA]), "ca.crt holds the cluster CA from kube-root-ca.crt")
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: svcName})
	assert.NoError(t, err, "a pod trusting ca.crt verifies the certificate for the Service name")

	assert.Zero(t, f.csrsLeft(t), "the CSR is deleted once its certificate is stored")
	assert.Equal(t, 1.0, f.outcome("issued"))
}

func TestIssuerStoresTheSignersChainAsTheCA(t *testing.T) {
	f := newIssuerFixture(t, nil)
	f.onApproval(f.signWith(t, nil, true))

	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

	assert.Equal(t, string(f.ca.PEM), string(f.storedSecret(t).Data[pemutil.KeyCA]), "the chain beyond the leaf is what pods trust")
	for _, a := range f.cs.Actions() {
		assert.NotEqual(t, "configmaps", a.GetResource().Resource, "no fallback read when the signer returned a chain")
	}
}

func TestIssuerRenewsIntoTheSameSecret(t *testing.T) {
	now := time.Now()
	// 10 h of 90 h left: past the renewal point at two thirds.
	old := newPair(t, ecKey(t), []string{svcName}, now.Add(-80*time.Hour), now.Add(10*time.Hour))
	f := newIssuerFixture(t, nil, managedSecret(old))
	f.onApproval(f.signWith(t, nil, true))

	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

	assert.Equal(t, []string{
		"create certificatesigningrequests",
		"update certificatesigningrequests/approval",
		"update secrets",
		"delete certificatesigningrequests",
	}, f.writes(), "the Secret is updated in place, not recreated")
	assert.NotEqual(t, string(old.cert), string(f.storedSecret(t).Data["tls.crt"]))
	assert.Equal(t, 1.0, f.outcome("issued"), "renewed, being due")
}

func TestIssuerReissuesWhenTheRequestedNamesChange(t *testing.T) {
	now := time.Now()
	current := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(89*time.Hour))
	f := newIssuerFixture(t, func(c *IssuerConfig) { c.DNSNames = append(c.DNSNames, "updates.example.com") }, managedSecret(current))
	f.onApproval(f.signWith(t, nil, true))

	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

	_, _, cert, err := pemutil.KeyPairFromSecret(f.storedSecret(t))
	require.NoError(t, err)
	assert.NoError(t, cert.Leaf.VerifyHostname("updates.example.com"), "the new name is covered")
	assert.Equal(t, 1.0, f.outcome("issued"), "re-issued although not due: it did not cover the name")
}

func TestIssuerDeniedCSRWritesNothingAndSaysWhy(t *testing.T) {
	f := newIssuerFixture(t, func(c *IssuerConfig) { c.Approve = false })
	f.onCreate(func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "PolicyViolation", Message: "not on the allow list"})
	})

	err := f.issuer.sync(context.Background(), tlsSecret)

	require.Error(t, err, "a denial is retried with backoff")
	assert.Contains(t, err.Error(), `was denied (reason "PolicyViolation": not on the allow list)`)
	assert.Equal(t, []string{"create certificatesigningrequests", "delete certificatesigningrequests"}, f.writes(),
		"approval left to others, no Secret written, the CSR cleaned up")
	assert.Zero(t, f.csrsLeft(t))
	assert.Equal(t, 1.0, f.outcome("denied"))
	logs := f.logs.String()
	assert.Contains(t, logs, "kubectl certificate approve "+f.createdCSR(t).Name, "the log tells an admin how to approve")
	assert.Contains(t, logs, "set OPERATOR_CSR_SIGNER_NAME", "the remedy, its settings spelled by whoever wired the issuer")
	assert.Contains(t, logs, `"csr":"`+f.createdCSR(t).Name+`"`)
}

func TestIssuerTimesOutWhenNoControllerSigns(t *testing.T) {
	// In a bubble: the timeout passes on the fake clock, not the test's
	// wall time.
	synctest.Test(t, func(t *testing.T) {
		f := newIssuerFixture(t, func(c *IssuerConfig) { c.Timeout = 300 * time.Millisecond; c.SignerName = "example.com/nobody" })

		err := f.issuer.sync(t.Context(), tlsSecret)

		require.Error(t, err)
		assert.Contains(t, err.Error(), "for signer example.com/nobody not signed within 300ms: approved but not signed: no controller signs for this signer")
		assert.Equal(t, []string{
			"create certificatesigningrequests",
			"update certificatesigningrequests/approval",
			"delete certificatesigningrequests",
		}, f.writes())
		assert.Zero(t, f.csrsLeft(t))
		assert.Equal(t, 1.0, f.outcome("timeout"))
	})
}

func TestIssuerRefusesACertificateForAnotherKey(t *testing.T) {
	f := newIssuerFixture(t, nil)
	f.onApproval(f.signWith(t, ecKey(t).Public(), true))

	err := f.issuer.sync(context.Background(), tlsSecret)

	require.Error(t, err)
	assert.Contains(t, err.Error(), "signed certificate does not match the request: its public key is not the one requested")
	assert.NotContains(t, f.writes(), "create secrets", "nothing stored")
	assert.Zero(t, f.csrsLeft(t))
	assert.Equal(t, 1.0, f.outcome("failed"))
}

func TestIssuerLeavesACurrentCertificateAlone(t *testing.T) {
	now := time.Now()
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(89*time.Hour))
	f := newIssuerFixture(t, nil, managedSecret(p))
	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))
	assert.Empty(t, f.cs.Actions(), "not due for renewal: no CSR, no write")
	assert.Equal(t, 0, f.issuer.queue.Len(), "the next look is scheduled at the renewal time, not now")
}

func TestIssuerNeverOverwritesASecretItDidNotCreate(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops", ResourceVersion: "7"},
		Data: map[string][]byte{"tls.crt": []byte("cert-manager's")}}
	f := newIssuerFixture(t, nil, foreign)
	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret), "nothing to retry: a change to the Secret brings it back")
	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))
	assert.Empty(t, f.cs.Actions(), "no CSR, no write")
	assert.Equal(t, 1, strings.Count(f.logs.String(), "autocert will not overwrite Secret ops/object-store-operator-tls"), "said once per version")
	assert.Contains(t, f.logs.String(), "set OPERATOR_AUTO_CERT_DISABLED=on", "the remedy, its settings spelled by whoever wired the issuer")
}

func TestIssuerRunsOnlyWhileLeading(t *testing.T) {
	cs := testutil.Clientset()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("ops"))
	i, err := NewIssuer(IssuerConfig{Client: cs, Secrets: factory.Core().V1().Secrets(), Namespace: "ops",
		SecretName: tlsSecret, DNSNames: []string{svcName}, Log: zerolog.Nop()})
	require.NoError(t, err)
	assert.True(t, i.NeedLeaderElection(), "only the leader files CSRs: the Manager runs it only while leading")
	assert.Empty(t, cs.Actions())
}

// cert-manager, given the Secret autocert fills (the seed's Step 1),
// applies its own fields only: the operator's label and annotations stay.
func certManagerWrote(t *testing.T, s *corev1.Secret, annotations bool) *corev1.Secret {
	t.Helper()
	s = s.DeepCopy()
	s.ResourceVersion = "9"
	now := time.Now()
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(8760*time.Hour))
	s.Data = map[string][]byte{"tls.crt": p.cert, "tls.key": p.key, "ca.crt": p.cert}
	s.Labels["controller.cert-manager.io/fao"] = "true"
	if annotations {
		s.Annotations["cert-manager.io/certificate-name"] = "operator-webhook-tls"
		s.Annotations["cert-manager.io/issuer-name"] = "corp-ca"
		s.Annotations["cert-manager.io/issuer-kind"] = "ClusterIssuer"
	}
	return s
}

func TestIssuerLeavesASecretAnotherIssuerWroteAloneWhateverLabelsItKept(t *testing.T) {
	now := time.Now()
	ours := managedSecret(newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(89*time.Hour)))
	for _, tt := range []struct {
		name        string
		annotations bool
		reason      Foreign
		detail      string
	}{
		{"with cert-manager's annotations", true, ForeignCertManager, `Certificate \"operator-webhook-tls\", issuer ClusterIssuer \"corp-ca\"`},
		{"by a writer that kept every annotation", false, ForeignCertificate, "is not the one autocert stored"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newIssuerFixture(t, nil, certManagerWrote(t, ours, tt.annotations))
			f.onApproval(f.signWith(t, nil, true))

			require.NoError(t, f.issuer.sync(context.Background(), tlsSecret), "nothing to retry: a change to the Secret brings it back")
			require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

			assert.Empty(t, f.writes(), "no CSR, no write: no fight")
			assert.Equal(t, 1.0, promtest.ToFloat64(f.metrics.foreign.WithLabelValues(tt.reason.Label())))
			logs := f.logs.String()
			assert.Equal(t, 1, strings.Count(logs, "autocert will not overwrite Secret ops/object-store-operator-tls"), "said once per version")
			for _, want := range []string{`"namespace":"ops"`, `"name":"object-store-operator-tls"`, `"reason":"` + string(tt.reason) + `"`,
				tt.detail, "set OPERATOR_AUTO_CERT_DISABLED=on and OPERATOR_CUSTOM_TLS_SECRET_NAME=object-store-operator-tls"} {
				assert.Contains(t, logs, want)
			}
		})
	}
}

func TestIssuerTakesItsSecretBackOnceTheOtherIssuerIsGone(t *testing.T) {
	now := time.Now()
	theirs := certManagerWrote(t, managedSecret(newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))), true)
	f := newIssuerFixture(t, nil, theirs)
	f.onApproval(f.signWith(t, nil, true))
	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))
	require.Equal(t, 1.0, promtest.ToFloat64(f.metrics.foreign.WithLabelValues("cert_manager")))

	// docs/tls.md, back to autocert: the Certificate, then the Secret, deleted.
	require.NoError(t, f.cs.CoreV1().Secrets("ops").Delete(context.Background(), tlsSecret, metav1.DeleteOptions{}))
	require.NoError(t, f.issuer.cfg.Secrets.Informer().GetIndexer().Delete(theirs))
	f.cs.ClearActions()
	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret))

	assert.Contains(t, f.writes(), "create secrets")
	assert.Equal(t, Owned, first(Ownership(f.storedSecret(t))), "what autocert stores, autocert owns")
	assert.Zero(t, promtest.ToFloat64(f.metrics.foreign.WithLabelValues("cert_manager")), "the metric clears")
}

func first[A, B any](a A, _ B) A { return a }

func TestIssuerDoesNotOverwriteASecretWrittenWhileItWasIssuing(t *testing.T) {
	f := newIssuerFixture(t, nil)
	// cert-manager creates the Secret while the CSR is being signed.
	f.onApproval(func(csr *certificatesv1.CertificateSigningRequest) {
		f.signWith(t, nil, false)(csr)
		// The tracker directly: the clientset is locked while its reactors run.
		require.NoError(t, f.cs.Tracker().Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: tlsSecret, Namespace: "ops", Annotations: map[string]string{"cert-manager.io/certificate-name": "x"}}}))
	})

	require.NoError(t, f.issuer.sync(context.Background(), tlsSecret), "not a failure: the Secret is decided again")

	assert.Equal(t, "x", f.storedSecret(t).Annotations["cert-manager.io/certificate-name"], "the other writer's Secret stands")
	assert.Zero(t, f.issuer.queue.Len(), "decided again on the other writer's event, not on a cache that may not hold it yet")
}
