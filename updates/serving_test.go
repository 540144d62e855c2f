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
// autocert's is (a restarted operator reads its Secret, or files a CSR,
// while its caches sync), or never (a CSR nobody approves).
type lateCert struct {
	mu   sync.Mutex
	cert *tls.Certificate
}

func (l *lateCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cert == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return l.cert, nil
}

func (l *lateCert) load(c tls.Certificate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cert = &c
}

// TestATenantIsNotRolledBecauseTheOperatorHasNoCertificateYet: a
// restarted operator's caches sync before its serving certificate loads.
// A tenant due an update then must not be judged unable to trust the
// upgrade server (OperatorNotTrusted) and rolled: the certificate it
// would trust is a moment away. It waits, saying why, then updates in
// place.
func TestATenantIsNotRolledBecauseTheOperatorHasNoCertificateYet(t *testing.T) {
	const httpsBase = "https://op.ops.svc:4221/webhook/v1/update"
	ca := testutil.NewCA(t, "operator CA")
	serving := &lateCert{}
	store := tenantStore("t", "tenant")
	require.NoError(t, unstructured.SetNestedField(store.Object, httpsBase+"/sha256/"+newSHA+"/minio."+relNew+".sha256sum", "status", "binary", "url"))
	f := newFixtureWith(t, func(c *Config) {
		c.UpdateURL = httpsBase
		c.Serving = serving
		c.Poll = 10 * time.Millisecond
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
	require.Eventually(t, func() bool { return conditionOf(f.live(t, "t", "tenant")).Reason != "" }, 5*time.Second, 5*time.Millisecond)
	c := conditionOf(f.live(t, "t", "tenant"))
	assert.Equal(t, ReasonUpdateQueued, c.Reason, "waits: %s", c.Message)
	assert.Contains(t, c.Message, "the upgrade server has no serving certificate loaded yet")
	assert.False(t, rolled(), "no tenant is rolled before the certificate loads")
	assert.Zero(t, f.admin("t", "tenant").callCount(), "nor called")

	serving.load(ca.Leaf(t, "op.ops.svc"))
	require.Eventually(t, func() bool { return f.admin("t", "tenant").realCalls() == 1 }, 5*time.Second, 5*time.Millisecond,
		"once it loads, the tenant is updated in place (its dry run, then the call)")
	assert.False(t, rolled())
}

// TestAnUpdateInFlightEndsWithoutACertificate: what needs no serving
// certificate goes on without one. A previous leader recorded an update
// and died; the new one's certificate never loads (a CSR nobody
// approves, a custom Secret missing). The update still ends at its
// timeout, freeing its fleet place and the tenant's held rollout. (Found
// by a hostile review of a first fix that held the whole term.)
func TestAnUpdateInFlightEndsWithoutACertificate(t *testing.T) {
	store := tenantStore("t", "tenant")
	forgeRecord(t, store, time.Now().Add(-2*time.Hour)) // the timeout is a minute
	f := newFixtureWith(t, func(c *Config) { c.Serving = &lateCert{} }, fakeBinaries{}, store)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.c.Run(ctx) }()
	f.c.queue.Add("t/tenant")
	require.Eventually(t, func() bool { return f.live(t, "t", "tenant").Status.Update == nil }, 5*time.Second, 5*time.Millisecond,
		"the update recorded 2h ago, past its 1m timeout, ends")
}
