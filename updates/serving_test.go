package updates

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// lateCert is a serving certificate loaded after the process starts, as
// autocert's is: a restarted operator reads its Secret, or files a CSR,
// while its caches sync.
type lateCert struct {
	mu     sync.Mutex
	cert   *tls.Certificate
	loaded chan struct{}
	// asked is closed the first time someone waits for the certificate.
	asked     chan struct{}
	askedOnce sync.Once
}

func newLateCert() *lateCert {
	return &lateCert{loaded: make(chan struct{}), asked: make(chan struct{})}
}

func (l *lateCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cert == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return l.cert, nil
}

func (l *lateCert) WhenLoaded() <-chan struct{} {
	l.askedOnce.Do(func() { close(l.asked) })
	return l.loaded
}

func (l *lateCert) load(c tls.Certificate) {
	l.mu.Lock()
	l.cert = &c
	l.mu.Unlock()
	close(l.loaded)
}

// TestARestartedOperatorDecidesNothingBeforeItsCertificateLoads: a
// restarted operator's caches sync before its serving certificate loads.
// A tenant due an update then must not be judged unable to trust the
// upgrade server (OperatorNotTrusted) and rolled: the certificate it
// would trust is a moment away. It waits, then updates in place.
func TestARestartedOperatorDecidesNothingBeforeItsCertificateLoads(t *testing.T) {
	const httpsBase = "https://op.ops.svc:4221/webhook/v1/update"
	ca := testutil.NewCA(t, "operator CA")
	serving := newLateCert()
	store := tenantStore("t", "tenant")
	require.NoError(t, unstructured.SetNestedField(store.Object, httpsBase+"/sha256/"+newSHA+"/minio."+relNew+".sha256sum", "status", "binary", "url"))
	f := newFixtureWith(t, func(c *Config) {
		c.UpdateURL = httpsBase
		c.Serving = serving
	}, fakeBinaries{}, store)
	_, err := f.kube.CoreV1().Secrets("t").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: v1.GeneratedSecretName("tenant"), Namespace: "t"},
		Data:       map[string][]byte{"CAs.operator.crt": ca.PEM},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.c.Run(ctx) }()
	f.c.queue.Add("t/tenant")
	rolled := func() bool {
		set, err := f.kube.AppsV1().StatefulSets("t").Get(t.Context(), "tenant-pool-0", metav1.GetOptions{})
		return err == nil && set.Spec.Template.Spec.Containers[0].Image != "minio/aistor:old"
	}
	require.Eventually(t, func() bool {
		select {
		case <-serving.asked:
			return true
		default:
			return rolled() || conditionOf(f.live(t, "t", "tenant")).Reason != ""
		}
	}, 5*time.Second, 5*time.Millisecond, "the controller waits for the certificate, or decides")
	assert.False(t, rolled(), "no tenant is rolled before the certificate loads")
	assert.Empty(t, conditionOf(f.live(t, "t", "tenant")).Reason, "nothing decided before the certificate loads")

	serving.load(ca.Leaf(t, "op.ops.svc"))
	require.Eventually(t, func() bool { return f.admin("t", "tenant").realCalls() == 1 }, 5*time.Second, 5*time.Millisecond,
		"once it loads, the tenant is updated in place (its dry run, then the call)")
	assert.False(t, rolled())
}
