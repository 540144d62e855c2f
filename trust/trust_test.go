package trust_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
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

// serverSignedBy starts an HTTPS server for 127.0.0.1 whose certificate
// only c vouches for.
func serverSignedBy(t *testing.T, c *testutil.CA) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{c.Leaf(t, "127.0.0.1")}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func startPool(t *testing.T, cs kubernetes.Interface, ns string, reg prometheus.Registerer) *trust.Pool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	p, err := trust.New(trust.Config{
		Namespace: ns, Secrets: factory.Core().V1().Secrets(), ClusterCA: testutil.NewCA(t, "cluster CA").PEM,
		SystemRoots: x509.NewCertPool(), Log: zerolog.Nop(), Registerer: reg,
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
	registryCA := testutil.NewCA(t, "private registry CA")
	srv := serverSignedBy(t, registryCA)
	reg := prometheus.NewRegistry()
	p := startPool(t, cs, ns, reg)
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
		Data:       map[string][]byte{"ca.crt": registryCA.PEM},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, reachable, 5*time.Second, 10*time.Millisecond, "trusted once the Secret exists: the registry's CA, by its subject")
	count, err := promtest.GatherAndCount(reg, "objectstore_operator_trusted_cas")
	require.NoError(t, err)
	assert.Equal(t, 1, count)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, 1.0, mfs[0].GetMetric()[0].GetGauge().GetValue(), "one trusted CA")

	require.NoError(t, cs.CoreV1().Secrets(ns).Delete(t.Context(), "aistor-ca-tls-registry", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return !reachable() }, 5*time.Second, 10*time.Millisecond,
		"no longer trusted once the Secret is gone, kept-alive connections included")
	mfs, err = reg.Gather()
	require.NoError(t, err)
	assert.Equal(t, 0.0, mfs[0].GetMetric()[0].GetGauge().GetValue(), "no trusted CA left")
}

func TestGarbageInOneSecretDoesNotDisturbTheOthers(t *testing.T) {
	cs := fake.NewClientset()
	good, ignored := testutil.NewCA(t, "good CA"), testutil.NewCA(t, "ignored")
	srv := serverSignedBy(t, good)
	p := startPool(t, cs, ns, nil)
	for name, data := range map[string]map[string][]byte{
		"aistor-ca-tls-good":    {"public.crt": good.PEM},
		"aistor-ca-tls-garbage": {"ca.crt": []byte("not a certificate")},
		"unrelated":             {"ca.crt": ignored.PEM},
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
	require.Eventually(t, func() bool { return len(p.Unusable()) > 0 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{ns + "/aistor-ca-tls-garbage: ca.crt: data that is not PEM"}, p.Unusable())
	resp, err := client.Get(serverSignedBy(t, ignored).URL)
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "only aistor-ca-tls* Secrets are trusted")
}
