package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/internal/testutil"
)

const customSecret = "operator-webhook-tls"

func waitServed(t testing.TB, op *operator, ns string, serial *big.Int) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		leaf, err := servedLeaf(op, ns, nil)
		return err == nil && leaf.SerialNumber.Cmp(serial) == 0
	}, 10*time.Second, 5*time.Millisecond, "serial %s not served", serial)
	return time.Since(start)
}

func TestCustomCertificateFromSecretIsLiveAndBadOnesNeverReplaceIt(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	names := serviceDNSNames(ns)
	now := time.Now()
	certPEM, keyPEM, serial := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
	// cert-manager's shape: kubernetes.io/tls keys plus ca.crt.
	putNamedSecret(t, ns, customSecret, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM})
	op := startOperator(t, soloEnv(ns, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+customSecret))
	waitServed(t, op, ns, serial)

	var line string
	for _, l := range strings.Split(op.logs.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "custom certificate") && strings.Contains(l, "TLS") && strings.Contains(l, "loaded") {
			line = l
		}
	}
	require.NotEmpty(t, line, "the AIStor documentation's troubleshooting step greps the log for 'custom certificate' and 'TLS'")
	assert.Contains(t, line, customSecret)
	assert.Contains(t, line, names[0])
	assert.Contains(t, line, "notAfter")
	assert.Equal(t, 1.0, counter(t, op, `objectstore_operator_serving_certificate_source{source="custom certificate"}`))
	assert.Zero(t, counter(t, op, `objectstore_operator_serving_certificate_source{source="autocert certificate"}`))
	assert.Empty(t, operatorCSRs(t, ns), "custom mode files no CSR")

	// MinIO-style keys work too, and the change is live.
	certPEM2, keyPEM2, serial2 := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
	putNamedSecret(t, ns, customSecret, map[string][]byte{"public.crt": certPEM2, "private.key": keyPEM2})
	t.Logf("Secret update -> new certificate served in %s", waitServed(t, op, ns, serial2).Round(time.Millisecond))

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherCert, _, _ := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
	rsaCert, _, _ := testutil.KeyPair(t, rsaKey, names, now.Add(-time.Hour), now.Add(time.Hour))
	expired, expiredKey, _ := testutil.KeyPair(t, nil, names, now.Add(-2*time.Hour), now.Add(-time.Hour))
	future, futureKey, _ := testutil.KeyPair(t, nil, names, now.Add(time.Hour), now.Add(2*time.Hour))
	otherSvc, otherSvcKey, _ := testutil.KeyPair(t, nil, []string{"minio.tenant.svc"}, now.Add(-time.Hour), now.Add(time.Hour))
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	weak, weakKey, _ := testutil.KeyPair(t, rsa1024, names, now.Add(-time.Hour), now.Add(time.Hour))
	clientOnly, clientOnlyKey, _ := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth)

	bad := []struct {
		name   string
		data   map[string][]byte
		reason string
	}{
		{"missing key", map[string][]byte{"tls.crt": certPEM2}, "private key is missing"},
		{"missing cert", map[string][]byte{"tls.key": keyPEM2}, "certificate is missing"},
		{"garbage PEM", map[string][]byte{"tls.crt": []byte("not a certificate"), "tls.key": keyPEM2}, "no PEM CERTIFICATE block"},
		{"key of another certificate", map[string][]byte{"tls.crt": otherCert, "tls.key": keyPEM2}, "belongs to another certificate"},
		{"RSA certificate with an ECDSA key", map[string][]byte{"tls.crt": rsaCert, "tls.key": keyPEM2}, "type does not match"},
		{"expired", map[string][]byte{"tls.crt": expired, "tls.key": expiredKey}, "expired at"},
		{"not yet valid", map[string][]byte{"tls.crt": future, "tls.key": futureKey}, "not yet valid"},
		{"SANs for another service", map[string][]byte{"tls.crt": otherSvc, "tls.key": otherSvcKey}, "do not cover " + names[0]},
		{"RSA-1024", map[string][]byte{"tls.crt": weak, "tls.key": weakKey}, "RSA key of 1024 bits; at least 2048 are required"},
		{"client certificate only", map[string][]byte{"tls.crt": clientOnly, "tls.key": clientOnlyKey}, "extended key usage is clientAuth, without serverAuth"},
		{"empty Secret", map[string][]byte{}, "no tls.crt/tls.key"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			putNamedSecret(t, ns, customSecret, tt.data)
			// docs/troubleshooting.md: grep for "rejected"; the reason says why.
			op.waitDocumentedLine(t, "TLS custom certificate rejected", tt.reason)
			leaf, err := servedLeaf(op, ns, nil)
			require.NoError(t, err)
			assert.Equal(t, serial2, leaf.SerialNumber, "the last good certificate keeps serving")
			assert.True(t, op.ready())
		})
	}
	t.Run("Secret deleted", func(t *testing.T) {
		require.NoError(t, adminClient(t).CoreV1().Secrets(ns).Delete(t.Context(), customSecret, metav1.DeleteOptions{}))
		op.waitDocumentedLine(t, "TLS custom certificate rejected", "does not exist")
		assert.Equal(t, 1.0, counter(t, op, `objectstore_operator_serving_certificate_rejected_total{reason="deleted"}`))
		leaf, err := servedLeaf(op, ns, nil)
		require.NoError(t, err)
		assert.Equal(t, serial2, leaf.SerialNumber)
	})
	t.Run("fixed again", func(t *testing.T) {
		certPEM3, keyPEM3, serial3 := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
		putNamedSecret(t, ns, customSecret, map[string][]byte{"tls.crt": certPEM3, "tls.key": keyPEM3})
		waitServed(t, op, ns, serial3)
	})
}

func TestPlainHTTPWhenAutocertDisabledWithoutSecret(t *testing.T) {
	t.Parallel() // no Kubernetes, nothing shared
	dir := t.TempDir()
	op := startOperator(t, []string{"OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_UPDATE_DIR=" + dir})
	out, err := execOutput("curl", "-sS", "--fail", "http://"+op.upgradeAddr+"/webhook/v1/update")
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `"binaries"`)
	assert.Contains(t, op.logs.String(), "plain HTTP")
}

// BenchmarkCustomCertificateRotation: the time from a custom Secret's
// update to the new certificate being served (`make bench-rotation`);
// reports the median and the slowest of the rotations.
func BenchmarkCustomCertificateRotation(b *testing.B) {
	ns := operatorNamespace(b)
	names := serviceDNSNames(ns)
	now := time.Now()
	certPEM, keyPEM, serial := testutil.KeyPair(b, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
	putNamedSecret(b, ns, customSecret, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	op := startOperator(b, k8sEnv(ns, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+customSecret))
	waitServed(b, op, ns, serial)

	var took []time.Duration
	for b.Loop() {
		certPEM, keyPEM, serial := testutil.KeyPair(b, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
		start := time.Now()
		putNamedSecret(b, ns, customSecret, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
		waitServed(b, op, ns, serial)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}

// A custom Secret without tls.key at start (docs/troubleshooting.md, "The
// operator is not ready"): the log names the missing key and says nothing
// is served yet; /readyz gives the same cause; adding the key is enough.
func TestCustomSecretWithoutAKeyAtStartNamesTheKeyInTheLogAndReadyz(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	names := serviceDNSNames(ns)
	now := time.Now()
	certPEM, keyPEM, serial := testutil.KeyPair(t, nil, names, now.Add(-time.Hour), now.Add(time.Hour))
	putNamedSecret(t, ns, customSecret, map[string][]byte{"tls.crt": certPEM})
	op := launchOperator(t, soloEnv(ns, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+customSecret))

	line := op.waitDocumentedLine(t, "TLS custom certificate rejected", "the Secret has tls.crt but no tls.key", "nothing is served yet")
	assert.NotContains(t, line, "keeping the certificate already served")
	var body string
	require.Eventually(t, func() bool {
		var ok bool
		ok, body = op.readyz()
		return !ok && strings.Contains(body, "the Secret has tls.crt but no tls.key")
	}, 10*time.Second, 20*time.Millisecond, "/readyz gives the cause: %s", body)
	assert.Contains(t, body, "serving-certificate: no serving certificate loaded yet: Secret "+ns+"/"+customSecret)

	putNamedSecret(t, ns, customSecret, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	op.waitReady(t)
	waitServed(t, op, ns, serial)
}
