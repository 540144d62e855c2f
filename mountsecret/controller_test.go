package mountsecret

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/fakeapi"
)

// fixture is fakeapi.API with the controller over it and its
// informers (never started; catchUp fills them).
type fixture struct {
	*fakeapi.API
	t      *testing.T
	meta   cache.SharedIndexInformer // Secrets, metadata only
	stores cache.SharedIndexInformer
	sets   cache.SharedIndexInformer
	c      *Controller
}

// catchUp does what the informers would after the sync's writes: the
// generated Secret's metadata and the ObjectStore's new status reach the
// caches.
func (f *fixture) catchUp() {
	f.t.Helper()
	f.catchUpButStatefulSets()
	sets, err := f.Kube.AppsV1().StatefulSets("t").List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range sets.Items {
		require.NoError(f.t, f.sets.GetIndexer().Update(&sets.Items[i]))
	}
	f.ClearActions()
}

// catchUpButStatefulSets is catchUp with the StatefulSets' cache left
// behind: the sync's patch has not reached it yet (its watch is another
// stream than the Secrets' and the ObjectStores').
func (f *fixture) catchUpButStatefulSets() {
	f.t.Helper()
	secrets, err := f.Kube.CoreV1().Secrets("t").List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range secrets.Items {
		require.NoError(f.t, f.meta.GetIndexer().Update(&metav1.PartialObjectMetadata{ObjectMeta: secrets.Items[i].ObjectMeta}))
	}
	u, err := f.Dynamic.Resource(v1.Resource).Namespace("t").Get(context.Background(), "s", metav1.GetOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, f.stores.GetIndexer().Update(u))
	f.ClearActions()
}

type staticCA []byte

func (s staticCA) CABundle() []byte         { return s }
func (s staticCA) Changed() <-chan struct{} { return nil }
func (s staticCA) WhenLoaded() <-chan struct{} {
	loaded := make(chan struct{})
	close(loaded)
	return loaded
}

func newFixture(t *testing.T, store *unstructured.Unstructured, secrets []*corev1.Secret, sets []*appsv1.StatefulSet) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, store, secrets, sets)
}

// newFixtureWith is newFixture with the controller's Config changed by
// configure.
func newFixtureWith(t *testing.T, configure func(*Config), store *unstructured.Unstructured, secrets []*corev1.Secret, sets []*appsv1.StatefulSet) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, s := range secrets {
		objs = append(objs, s)
	}
	for _, s := range sets {
		objs = append(objs, s)
	}
	f := &fixture{t: t, API: fakeapi.New([]*unstructured.Unstructured{store}, objs...)}
	f.meta = testutil.Informer(&metav1.PartialObjectMetadata{})
	f.stores = testutil.Informer(&unstructured.Unstructured{})
	stores, meta := f.stores, f.meta
	factory := informers.NewSharedInformerFactory(f.Kube, 0)
	f.sets = factory.Apps().V1().StatefulSets().Informer()
	cfg := Config{
		Kube: f.Kube, Dynamic: f.Dynamic, Secrets: meta, StatefulSets: factory.Apps().V1().StatefulSets(),
		ObjectStores: stores, OperatorCA: staticCA("operator-ca"), Recorder: record.NewFakeRecorder(10), Log: zerolog.Nop(),
	}
	if configure != nil {
		configure(&cfg)
	}
	var err error
	f.c, err = New(cfg)
	require.NoError(t, err)
	require.NoError(t, stores.GetIndexer().Add(store))
	for _, s := range secrets {
		require.NoError(t, meta.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}))
	}
	for _, s := range sets {
		require.NoError(t, factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(s))
	}
	return f
}

// lead makes the controller act as the leader for the rest of the test:
// a sync acts whenever it is called, the Manager calls it only while
// leading (TestTheControllerRunsOnlyWhileLeading).
func (f *fixture) lead() {}

func objectStore(refs ...string) *unstructured.Unstructured {
	var server []any
	for _, r := range refs {
		server = append(server, map[string]any{"name": r})
	}
	u := fakeapi.UnstructuredObjectStore("t", "s", map[string]any{"certificates": map[string]any{"server": server}})
	u.SetUID("uid-of-s")
	return u
}

func tenantStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "s-pool-0", Namespace: "t", ResourceVersion: "1",
		Labels: map[string]string{v1.ObjectStoreLabel: "s"}}}
}

func TestSyncCreatesTheSecretRollsThePodsAndSaysSo(t *testing.T) {
	cert, key := pair(t, "s.t.svc")
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-tls", Namespace: "t", ResourceVersion: "1"},
		Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	f := newFixture(t, objectStore("s-tls"), []*corev1.Secret{tls}, []*appsv1.StatefulSet{tenantStatefulSet()})
	f.lead()

	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, []string{
		"get secrets",               // the referenced Secret's data, once
		"create secrets",            // s-generated
		"patch statefulsets",        // the restart annotation
		"patch objectstores/status", // CertificatesReady=True, applied
	}, f.Actions())
	gen, err := f.Kube.CoreV1().Secrets("t").Get(context.Background(), "s-generated", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cert, gen.Data[KeyPublicCert])
	assert.Equal(t, []byte("operator-ca"), gen.Data[KeyOperatorCA])
	assert.Equal(t, "uid-of-s", string(metav1.GetControllerOf(gen).UID))
	set, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, set.Spec.Template.Annotations[RestartAnnotation])
	assert.Contains(t, set.Annotations, v1.RolloutAnnotation, "the operator's rollout replaces the pods, not the statefulset controller at once")
	require.NotNil(t, set.Spec.UpdateStrategy.RollingUpdate)
	assert.Equal(t, int32(1), *set.Spec.UpdateStrategy.RollingUpdate.Partition, "RollingUpdate (the default): the partition is held at the replicas")

	// Level-based: the same world again (a resync, a restart) is no news.
	f.catchUp()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Empty(t, f.Actions(), "nothing changed: no read, no write")
}

func TestTheControllerRunsOnlyWhileLeading(t *testing.T) {
	f := newFixture(t, objectStore("s-tls"), nil, nil)
	assert.True(t, f.c.NeedLeaderElection(), "only the leader reads and writes: the Manager runs it only while leading")
}

func TestSyncOfAMissingSecretWritesOnlyTheCondition(t *testing.T) {
	f := newFixture(t, objectStore("absent"), nil, []*appsv1.StatefulSet{tenantStatefulSet()})
	f.lead()
	require.NoError(t, f.c.sync(context.Background(), "t/s"), "nothing to retry: the Secret's creation syncs again")
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions(),
		"no GET for a Secret the informer does not know, no generated Secret, no roll")
	assert.Equal(t, "SecretNotFound", f.Condition(t, "t", "s").Reason)
}
