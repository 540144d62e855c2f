package autocert

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/object-store-operator/operator/internal/pemutil"
	"github.com/object-store-operator/operator/internal/testutil"
)

const svcName = "object-store-operator.ops.svc"

type pair struct{ cert, key []byte }

func newPair(t *testing.T, key crypto.Signer, dnsNames []string, notBefore, notAfter time.Time) pair {
	t.Helper()
	return newPairFor(t, key, dnsNames, notBefore, notAfter, x509.ExtKeyUsageServerAuth)
}

// newPairFor is newPair with the given extended key usages.
func newPairFor(t *testing.T, key crypto.Signer, dnsNames []string, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) pair {
	t.Helper()
	cert, k, _ := testutil.KeyPair(t, key, dnsNames, notBefore, notAfter, usages...)
	return pair{cert: cert, key: k}
}

func ecKey(t *testing.T) crypto.Signer { return testutil.ECKey(t) }

func TestCandidateValidation(t *testing.T) {
	now := time.Now()
	valid := func(t *testing.T) pair {
		return newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)

	tests := []struct {
		name    string
		pair    func(t *testing.T) pair
		wantErr string
	}{
		{"valid ECDSA", valid, ""},
		{"valid RSA", func(t *testing.T) pair {
			return newPair(t, rsaKey, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, ""},
		{"valid Ed25519", func(t *testing.T) pair {
			return newPair(t, edKey, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, ""},
		{"empty", func(*testing.T) pair { return pair{} }, "both missing"},
		{"missing key", func(t *testing.T) pair { p := valid(t); p.key = nil; return p }, "private key is missing"},
		{"missing cert", func(t *testing.T) pair { p := valid(t); p.cert = nil; return p }, "certificate is missing"},
		{"garbage cert", func(t *testing.T) pair { p := valid(t); p.cert = []byte("hello"); return p }, "no PEM CERTIFICATE block"},
		{"garbage key", func(t *testing.T) pair { p := valid(t); p.key = []byte("hello"); return p }, "no PEM PRIVATE KEY block"},
		{"key of another cert", func(t *testing.T) pair { p := valid(t); p.key = valid(t).key; return p }, "belongs to another certificate"},
		{"RSA key for ECDSA cert", func(t *testing.T) pair {
			p := valid(t)
			p.key = newPair(t, rsaKey, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour)).key
			return p
		}, "type does not match"},
		{"Ed25519 key for RSA cert", func(t *testing.T) pair {
			p := newPair(t, rsaKey, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
			p.key = newPair(t, edKey, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour)).key
			return p
		}, "type does not match"},
		{"expired", func(t *testing.T) pair {
			return newPair(t, ecKey(t), []string{svcName}, now.Add(-2*time.Hour), now.Add(-time.Hour))
		}, "expired at"},
		{"not yet valid", func(t *testing.T) pair {
			return newPair(t, ecKey(t), []string{svcName}, now.Add(time.Hour), now.Add(2*time.Hour))
		}, "not yet valid"},
		{"SANs for another service", func(t *testing.T) pair {
			return newPair(t, ecKey(t), []string{"other.ops.svc"}, now.Add(-time.Hour), now.Add(time.Hour))
		}, "SANs [other.ops.svc] do not cover " + svcName},
		{"RSA-1024", func(t *testing.T) pair {
			k, err := rsa.GenerateKey(rand.Reader, 1024)
			require.NoError(t, err)
			return newPair(t, k, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, "RSA key of 1024 bits; at least 2048 are required"},
		{"P-521", func(t *testing.T) pair {
			k, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
			require.NoError(t, err)
			return newPair(t, k, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, "ECDSA key on curve P-521; use P-256 or P-384"},
		{"valid P-384", func(t *testing.T) pair {
			k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
			require.NoError(t, err)
			return newPair(t, k, []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, ""},
		{"client certificate only", func(t *testing.T) pair {
			return newPairFor(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth)
		}, "extended key usage is clientAuth, without serverAuth"},
		{"no extended key usage", func(t *testing.T) pair {
			return newPairFor(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
		}, ""},
		{"server and client", func(t *testing.T) pair {
			return newPairFor(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth)
		}, ""},
	}
	v := Validator{DNSName: svcName}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.pair(t)
			cert, err := pemutil.ParseKeyPair(p.cert, p.key)
			if err == nil {
				err = v.Validate(cert)
			}
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestRejectedCandidateNeverReplacesTheServedCertificate(t *testing.T) {
	now := time.Now()
	cur := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName}, nil, nil)
	assert.Error(t, cur.Ready())

	good := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	cert, err := pemutil.ParseKeyPair(good.cert, good.key)
	require.NoError(t, err)
	require.NoError(t, cur.Offer("test", "good", cert, nil))
	require.NoError(t, cur.Ready())
	served := cur.Leaf().SerialNumber

	expired := newPair(t, ecKey(t), []string{svcName}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	bad, err := pemutil.ParseKeyPair(expired.cert, expired.key)
	require.NoError(t, err)
	assert.ErrorContains(t, cur.Offer("test", "bad", bad, nil), "expired")
	assert.Equal(t, served, cur.Leaf().SerialNumber)
}

func TestWatchFilesReloadsAndKeepsTheLastGoodCertificate(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(p pair) {
		require.NoError(t, os.WriteFile(certFile, p.cert, 0o600))
		require.NoError(t, os.WriteFile(keyFile, p.key, 0o600))
	}
	first := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	write(first)
	metrics := NewMetrics(nil)
	cur := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName}, metrics, nil)
	go func() { _ = WatchFiles(t.Context(), cur, certFile, keyFile, 50*time.Millisecond) }()
	require.Eventually(t, func() bool { return cur.Ready() == nil }, 5*time.Second, 10*time.Millisecond)
	firstSerial := cur.Leaf().SerialNumber

	second := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	write(second)
	require.Eventually(t, func() bool { return cur.Leaf().SerialNumber.Cmp(firstSerial) != 0 }, 5*time.Second, 10*time.Millisecond)
	secondSerial := cur.Leaf().SerialNumber

	require.NoError(t, os.WriteFile(certFile, []byte("garbage"), 0o600))
	require.Eventually(t, func() bool { return promtest.ToFloat64(metrics.rejected.WithLabelValues("garbage")) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, cur.rejections(), "no PEM CERTIFICATE block", "the cause, as /readyz gives it")
	assert.Equal(t, secondSerial, cur.Leaf().SerialNumber, "the certificate already served is kept")
	assert.NoError(t, cur.Ready())
}

func TestRenewalIsDueAtTwoThirdsOfTheLifetimeByDefault(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(90 * time.Hour)}
	assert.Equal(t, start.Add(60*time.Hour), (&Issuer{}).renewAt(leaf))
	explicit := &Issuer{cfg: IssuerConfig{RenewBefore: time.Hour}}
	assert.Equal(t, start.Add(89*time.Hour), explicit.renewAt(leaf))
}

func TestDetectSignerChoosesTheEKSSignerOnlyOnEKS(t *testing.T) {
	node := func(name string, labels map[string]string, kubelet string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}},
		}
	}
	tests := []struct {
		name  string
		nodes []runtime.Object
		deny  bool
		want  string
	}{
		{"kubeadm", []runtime.Object{node("n1", nil, "v1.36.3")}, false, DefaultSigner},
		{"EKS node group label", []runtime.Object{node("n1", map[string]string{"eks.amazonaws.com/nodegroup": "ng"}, "v1.36.3")}, false, EKSSigner},
		{"EKS kubelet version", []runtime.Object{node("n1", nil, "v1.36.3-eks-abc123")}, false, EKSSigner},
		{"nodes not listable", nil, true, DefaultSigner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := testutil.Clientset(tt.nodes...)
			if tt.deny {
				cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", errors.New("RBAC"))
				})
			}
			assert.Equal(t, tt.want, DetectSigner(t.Context(), cs, zerolog.Nop()))
		})
	}
}

func TestDetectSignerAsksAgainWhileTheAPIServerDoesNotAnswer(t *testing.T) {
	cs := testutil.Clientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"eks.amazonaws.com/nodegroup": "ng"}},
	})
	failures := 2
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		}
		return false, nil, nil
	})
	assert.Equal(t, EKSSigner, detectSigner(t.Context(), cs, zerolog.Nop(), time.Millisecond),
		"an outage during start-up does not settle on the wrong signer")
	assert.Zero(t, failures)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	down := testutil.Clientset()
	down.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	assert.Equal(t, DefaultSigner, detectSigner(ctx, down, zerolog.Nop(), time.Millisecond), "gives up only when stopped")
}

func TestReadinessFailsOnceTheServedCertificateHasExpired(t *testing.T) {
	now := time.Now()
	clock := now
	cur := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName, Now: func() time.Time { return clock }}, nil, nil)
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	cert, err := pemutil.ParseKeyPair(p.cert, p.key)
	require.NoError(t, err)
	require.NoError(t, cur.Offer("test", "good", cert, nil))
	require.NoError(t, cur.Ready())

	clock = now.Add(2 * time.Hour)
	assert.ErrorContains(t, cur.Ready(), "expired at", "no client accepts it: the replica is not ready")
	assert.True(t, cur.Loaded(), "it is still what is served (and what pods are told to trust)")
	assert.Equal(t, cert.Leaf.SerialNumber, cur.Leaf().SerialNumber)
}

func TestAWatchThatFailsAtOnceIsRetriedWithBackoffNotInALoop(t *testing.T) {
	// In a bubble: the reflector's backoff (800 ms doubling) and the 2 s
	// timeout pass on the fake clock, not the test's wall time.
	synctest.Test(t, func(t *testing.T) {
		pending := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "csr-1", ResourceVersion: "5"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName},
		}
		cs := testutil.Clientset(pending)
		var watches atomic.Int64
		cs.PrependWatchReactor("certificatesigningrequests", func(k8stesting.Action) (bool, watch.Interface, error) {
			watches.Add(1)
			w := watch.NewRaceFreeFake()
			w.Error(&metav1.Status{Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
			return true, w, nil
		})
		i := &Issuer{cfg: IssuerConfig{Client: cs, Timeout: 2 * time.Second, SignerName: certificatesv1.KubeletServingSignerName, Metrics: NewMetrics(nil), Approve: true}}
		_, err := i.waitSigned(t.Context(), pending)
		assert.ErrorContains(t, err, "not signed within 2s")
		// client-go's reflector backs off (800 ms doubling): a handful of
		// watches in 2 s, where a re-watch without backoff would make thousands.
		assert.LessOrEqual(t, watches.Load(), int64(5))
		assert.GreaterOrEqual(t, watches.Load(), int64(2), "it did try again")

		// The CSR is listed again after a failed watch, so a certificate
		// issued meanwhile is still found.
		signed := pending.DeepCopy()
		signed.Status.Certificate = []byte("chain")
		signed.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(t.Context(), signed, metav1.UpdateOptions{})
		require.NoError(t, err)
		chain, err := i.waitSigned(t.Context(), pending)
		require.NoError(t, err)
		assert.Equal(t, []byte("chain"), chain)
	})
}

func TestANewTermDeletesOnlyItsInstallationsLeftoverCSRs(t *testing.T) {
	csr := func(name, ns string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{ManagedByLabel: ManagedByValue, NamespaceLabel: ns}}}
	}
	cs := testutil.Clientset(csr("ours-1", "ops"), csr("ours-2", "ops"), csr("other-install", "ops-2"),
		&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "node-csr-abc"}})
	i := &Issuer{cfg: IssuerConfig{Client: cs, Namespace: "ops"}, log: zerolog.Nop()}
	i.deleteLeftoverCSRs(t.Context())
	list, err := cs.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, c := range list.Items {
		left = append(left, c.Name)
	}
	assert.ElementsMatch(t, []string{"other-install", "node-csr-abc"}, left)
}

func TestServedCertificateMetricsReadTheCurrentCertificate(t *testing.T) {
	reg := prometheus.NewRegistry()
	cur := NewCurrent(zerolog.Nop(), Validator{DNSName: svcName}, NewMetrics(reg), nil)
	count, err := promtest.GatherAndCount(reg, "objectstore_operator_serving_certificate_expiry_timestamp_seconds")
	require.NoError(t, err)
	assert.Zero(t, count, "nothing served, nothing reported")

	now := time.Now()
	p := newPair(t, ecKey(t), []string{svcName}, now.Add(-time.Hour), now.Add(time.Hour))
	cert, err := pemutil.ParseKeyPair(p.cert, p.key)
	require.NoError(t, err)
	require.NoError(t, cur.Offer(KindFiles, "test", cert, nil))
	require.NoError(t, promtest.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP objectstore_operator_serving_certificate_expiry_timestamp_seconds NotAfter of the served certificate, as a Unix timestamp.
# TYPE objectstore_operator_serving_certificate_expiry_timestamp_seconds gauge
objectstore_operator_serving_certificate_expiry_timestamp_seconds %d
# HELP objectstore_operator_serving_certificate_source 1 for the source of the served certificate (autocert, custom certificate, certificate files).
# TYPE objectstore_operator_serving_certificate_source gauge
objectstore_operator_serving_certificate_source{source=%q} 1
`, cert.Leaf.NotAfter.Unix(), KindFiles)), "objectstore_operator_serving_certificate_expiry_timestamp_seconds", "objectstore_operator_serving_certificate_source"))
}
