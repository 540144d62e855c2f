package rollout

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/status"
	"github.com/object-store-operator/operator/test/fakeapi"
)

// health answers the maintenance check as a test says.
type health struct {
	err   error
	asked int
}

func (h *health) MayTakeDown(context.Context, *v1.ObjectStore) error {
	h.asked++
	return h.err
}

type fixture struct {
	*fakeapi.API
	t      *testing.T
	c      *Controller
	health *health
	store  *unstructured.Unstructured
	pods   cache.SharedIndexInformer
}

func newFixture(t *testing.T, set *appsv1.StatefulSet, pods map[string]*corev1.Pod) *fixture {
	t.Helper()
	store := fakeapi.UnstructuredObjectStore("t", "s", map[string]any{})
	objs := []runtime.Object{set}
	for _, p := range pods {
		objs = append(objs, p)
	}
	f := &fixture{t: t, API: fakeapi.New([]*unstructured.Unstructured{store}, objs...), health: &health{}, store: store}
	sets := testutil.Informer(&appsv1.StatefulSet{})
	f.pods = testutil.Informer(&corev1.Pod{})
	stores := testutil.Informer(&unstructured.Unstructured{})
	require.NoError(t, f.pods.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))
	require.NoError(t, sets.GetIndexer().Add(set))
	for _, p := range pods {
		require.NoError(t, f.pods.GetIndexer().Add(p))
	}
	require.NoError(t, stores.GetIndexer().Add(store))
	var err error
	f.c, err = New(Config{Kube: f.Kube, Dynamic: f.Dynamic, StatefulSets: sets, Pods: f.pods, ObjectStores: stores,
		Health: f.health, MaxUnavailable: 1, PodTimeout: 10 * time.Minute, QuorumPoll: 5 * time.Second,
		Recorder: record.NewFakeRecorder(10), Log: zerolog.Nop(), Clock: clocktesting.NewFakeClock(t0)})
	require.NoError(t, err)
	return f
}

func (f *fixture) sync() (time.Duration, error) {
	f.t.Helper()
	res, err := f.c.Reconcile(context.Background(), status.ObjectStore(f.store), f.store)
	return res.RequeueAfter, err
}

func TestOnDeleteThePodIsDeletedOnlyOnceMinIOAgrees(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))

	f.health.err = fmt.Errorf("https://s-hl.t.svc:9000: %w", ErrNotNow)
	after, err := f.sync()
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, after, "MinIO is asked again soon")
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions(), "no pod is deleted while MinIO says no")
	c := f.Condition(t, "t", "s")
	assert.Equal(t, v1.ConditionPodsCurrent, c.Type)
	assert.Equal(t, ReasonWaitingForQuorum, c.Reason)
	assert.Contains(t, c.Message, "pod s-pool-0-3 waits")
	assert.Contains(t, c.Message, "0/4 pods current")

	f.ClearActions()
	f.health.err = nil
	_, err = f.sync()
	require.NoError(t, err)
	assert.Equal(t, []string{"delete pods", "patch objectstores/status"}, f.Actions())
	_, err = f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-pool-0-3", metav1.GetOptions{})
	assert.Error(t, err, "the highest ordinal is deleted: the statefulset controller creates it from the new template")
	c = f.Condition(t, "t", "s")
	assert.Equal(t, ReasonReplacingPod, c.Reason)
	assert.Contains(t, c.Message, "replacing pod s-pool-0-3 (0/4 pods current)")
}

func TestUnderRollingUpdateThePartitionIsLoweredOneOrdinal(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(3), *got.Spec.UpdateStrategy.RollingUpdate.Partition, "the statefulset controller replaces ordinal 3 alone")
	assert.Equal(t, 1, f.health.asked)
}

func TestAMinIOTheOperatorCannotAskIsReplacedOnReadinessAlone(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.health.err = errors.New("dial tcp: connection refused")
	_, err := f.sync()
	require.NoError(t, err)
	assert.Contains(t, f.Actions(), "delete pods")
	assert.Contains(t, f.Condition(t, "t", "s").Message, "without the maintenance check (dial tcp: connection refused)")
}

func TestWhenEveryPodIsCurrentTheTenantsPartitionIsGivenBack(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.RollingUpdateStatefulSetStrategyType)
	s.Annotations[v1.RolloutAnnotation] = "1" // the tenant's own partition before the rollout
	pods := podsOf(s)
	replaced(pods, "s-pool-0-0", t0, true)
	replaced(pods, "s-pool-0-1", t0, true)
	f := newFixture(t, s, pods)
	_, err := f.sync()
	require.NoError(t, err)
	got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), *got.Spec.UpdateStrategy.RollingUpdate.Partition)
	assert.NotContains(t, got.Annotations, v1.RolloutAnnotation, "the rollout is over")
	assert.Zero(t, f.health.asked)
	c := f.Condition(t, "t", "s")
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, ReasonPodsCurrent, c.Reason)
}

func TestAnObjectStoreWithNothingToReplaceIsNotWritten(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	delete(s.Annotations, v1.RolloutAnnotation)
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	assert.Empty(t, f.Actions())
}
