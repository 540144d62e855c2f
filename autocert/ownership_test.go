package autocert

import (
	"context"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/testutil"
)

func TestOwnershipRecognisesAnotherIssuersCertificate(t *testing.T) {
	now := time.Now()
	mine := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	theirs := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	labelled := map[string]string{ManagedByLabel: ManagedByValue}
	secret := func(labels, annotations map[string]string, p *pair) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: "ops", Labels: labels, Annotations: annotations}}
		if p != nil {
			s.Data = map[string][]byte{pemutil.KeyTLSCert: p.cert, pemutil.KeyTLSKey: p.key}
		}
		return s
	}
	recorded := map[string]string{CSRAnnotation: "csr-1", FingerprintAnnotation: fingerprintPEM(mine.cert)}
	certManager := map[string]string{CSRAnnotation: "csr-1", FingerprintAnnotation: fingerprintPEM(mine.cert),
		"cert-manager.io/certificate-name": "operator-webhook-tls", "cert-manager.io/issuer-name": "corp-ca", "cert-manager.io/issuer-kind": "ClusterIssuer"}

	for _, tt := range []struct {
		name   string
		secret *corev1.Secret
		want   Foreign
		detail string
	}{
		{"no Secret: autocert creates it", nil, Owned, ""},
		{"the certificate autocert stored", secret(labelled, recorded, &mine), Owned, ""},
		{"cert-manager's certificate, autocert's label and annotations kept", secret(labelled, certManager, &theirs), ForeignCertManager,
			`cert-manager wrote its certificate (Certificate "operator-webhook-tls", issuer ClusterIssuer "corp-ca")`},
		{"cert-manager's annotations even over autocert's own certificate", secret(labelled, certManager, &mine), ForeignCertManager, "cert-manager"},
		{"another writer that kept every label and annotation", secret(labelled, recorded, &theirs), ForeignCertificate,
			"is not the one autocert stored (sha256 " + fingerprintPEM(mine.cert)[:16]},
		{"garbage where the certificate was", secret(labelled, recorded, &pair{cert: []byte("garbage"), key: mine.key}), ForeignCertificate, "sha256 none"},
		{"unlabelled", secret(nil, nil, &theirs), ForeignUnlabelled, "lacks the label app.kubernetes.io/managed-by=object-store-operator"},
		{"labelled, no certificate yet", secret(labelled, recorded, nil), Owned, ""},
		{"stored before fingerprints were recorded (names its CSR)", secret(labelled, map[string]string{CSRAnnotation: "csr-1"}, &mine), Owned, ""},
		{"labelled by someone else, with no record of autocert", secret(labelled, nil, &theirs), ForeignCertificate, "no aistor.min.io/certificate-sha256 annotation"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, detail := Ownership(tt.secret)
			assert.Equal(t, tt.want, got)
			assert.Contains(t, detail, tt.detail)
		})
	}
}

// secretSourceFixture serves Secret ops/object-store-operator-tls of the
// given kind through cur, from an informer (never started) whose store it
// returns for the test to change.
func secretSourceFixture(t *testing.T, kind string, logs *testutil.LockedBuffer, cur *Current) (*SecretSource, cache.Indexer) {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(testutil.Clientset(), 0, informers.WithNamespace("ops"))
	src, err := NewSecretSource(kind, "ops", tlsSecret, "", factory.Core().V1().Secrets(), cur, zerolog.New(logs))
	require.NoError(t, err)
	return src, factory.Core().V1().Secrets().Informer().GetIndexer()
}

func TestAutocertServesOnlyWhatAutocertStored(t *testing.T) {
	now := time.Now()
	ours := managedSecret(newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour)))
	logs := &testutil.LockedBuffer{}
	metrics := NewMetrics(nil)
	cur := NewCurrent(zerolog.New(logs), Validator{DNSName: svcName}, metrics, nil)
	src, store := secretSourceFixture(t, KindAutocert, logs, cur)
	require.NoError(t, store.Add(ours))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	served := cur.Leaf()
	require.NotNil(t, served)

	// The seed's Step 1: cert-manager writes into the Secret.
	require.NoError(t, store.Update(certManagerWrote(t, ours, true)))
	require.NoError(t, src.sync(context.Background(), tlsSecret))

	assert.Equal(t, served.SerialNumber, cur.Leaf().SerialNumber, "autocert keeps serving what it served")
	assert.Equal(t, 1.0, promtest.ToFloat64(metrics.rejected.WithLabelValues("foreign")))
	assert.Contains(t, cur.rejections(), "cert-manager wrote its certificate", "the cause, as /readyz gives it")

	// The same Secret is served once the operator is told to serve it.
	custom := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName}, nil, nil)
	src, store = secretSourceFixture(t, KindCustom, logs, custom)
	require.NoError(t, store.Add(certManagerWrote(t, ours, true)))
	require.NoError(t, src.sync(context.Background(), tlsSecret))
	assert.NoError(t, custom.Ready(), "a custom certificate is whoever's the user names")
}
