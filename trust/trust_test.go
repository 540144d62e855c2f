package trust_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/trust"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return ca{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverSignedBy starts an HTTPS server for 127.0.0.1 whose certificate
// only ca vouches for.
func serverSignedBy(t *testing.T, c ca) *httptest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func startPool(t *testing.T, cs kubernetes.Interface, ns string, logs *testutil.LockedBuffer, reg prometheus.Registerer) *trust.Pool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	p, err := trust.New(trust.Config{
		Namespace: ns, Secrets: factory.Core().V1().Secrets(), ClusterCA: newCA(t, "cluster CA").pem,
		SystemRoots: x509.NewCertPool(), Log: zerolog.New(logs), Registerer: reg,
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	go func() { _ = p.Run(ctx) }()
	return p
}

// The pool only watches Secrets of its namespace: a fake clientset and a
// real informer over it cover it, no control plane needed.
const ns = "ops"

func TestCASecretIsTrustedWhileItExists(t *testing.T) {
	cs := fake.NewClientset()
	registryCA := newCA(t, "private registry CA")
	srv := serverSignedBy(t, registryCA)
	logs := &testutil.LockedBuffer{}
	reg := prometheus.NewRegistry()
	p := startPool(t, cs, ns, logs, reg)
	client := &http.Client{Transport: p.Transport(), Timeout: 5 * time.Second}

	reachable := func() bool {
		resp, err := client.Get(srv.URL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	assert.False(t, reachable(), "not trusted before the Secret exists")

	_, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "aistor-ca-tls-registry"},
		Data:       map[string][]byte{"ca.crt": registryCA.pem},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, reachable, 5*time.Second, 10*time.Millisecond, "trusted once the Secret exists")
	assert.Contains(t, logs.String(), `"subjects":["CN=private registry CA"]`)
	count, err := promtest.GatherAndCount(reg, "objectstore_operator_trusted_cas")
	require.NoError(t, err)
	assert.Equal(t, 1, count)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, 1.0, mfs[0].GetMetric()[0].GetGauge().GetValue(), "one trusted CA")

	require.NoError(t, cs.CoreV1().Secrets(ns).Delete(t.Context(), "aistor-ca-tls-registry", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return !reachable() }, 5*time.Second, 10*time.Millisecond,
		"no longer trusted once the Secret is gone, kept-alive connections included")
	assert.Contains(t, logs.String(), "no longer trusted")
}

func TestGarbageInOneSecretDoesNotDisturbTheOthers(t *testing.T) {
	cs := fake.NewClientset()
	good := newCA(t, "good CA")
	srv := serverSignedBy(t, good)
	logs := &testutil.LockedBuffer{}
	p := startPool(t, cs, ns, logs, nil)
	for name, data := range map[string]map[string][]byte{
		"aistor-ca-tls-good":    {"public.crt": good.pem},
		"aistor-ca-tls-garbage": {"ca.crt": []byte("not a certificate")},
		"unrelated":             {"ca.crt": newCA(t, "ignored").pem},
	} {
		_, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	client := &http.Client{Transport: p.Transport(), Timeout: 5 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "aistor-ca-tls-garbage") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), "ca.crt: data that is not PEM")
	assert.NotContains(t, logs.String(), "CN=ignored", "only aistor-ca-tls* Secrets are trusted")
}
