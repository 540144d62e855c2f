package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	// about is the last pod asked about; elsewhere what MayTakeDown says
	// of who answered.
	about, elsewhere string
}

func (h *health) MayTakeDown(_ context.Context, _ *v1.ObjectStore, pod string) (string, error) {
	h.asked++
	h.about = pod
	return h.elsewhere, h.err
}

type fixture struct {
	*fakeapi.API
	t      *testing.T
	c      *Controller
	health *health
	store  *unstructured.Unstructured
	sets   cache.SharedIndexInformer
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
	f.sets = sets
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
	assert.Equal(t, "s-pool-0-3", f.health.about, "MinIO is asked about the pod to replace")
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

// One disruption at a time: while an in-place update is in flight no pod
// is taken down, not even one MinIO would let go.
func TestNoPodIsTakenDownDuringAnInPlaceUpdate(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	require.NoError(t, unstructured.SetNestedMap(f.store.Object, map[string]any{
		"release": "RELEASE.2026-11-01T00-00-00Z", "started": "2026-11-27T00:00:00Z", "calls": int64(1), "lastCall": "2026-11-27T00:00:00Z",
	}, "status", "update"))
	after, err := f.sync()
	require.NoError(t, err)
	assert.Zero(t, after, "not polled: the update's end queues it")
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions(), "no pod deleted")
	assert.Zero(t, f.health.asked, "MinIO is not asked either")
	c := f.Condition(t, "t", "s")
	assert.Equal(t, ReasonWaitingForUpdate, c.Reason)
	assert.Contains(t, c.Message, "the in-place update to RELEASE.2026-11-01T00-00-00Z ends")

	// The update over: the rollout goes on.
	unstructured.RemoveNestedField(f.store.Object, "status", "update")
	f.ClearActions()
	_, err = f.sync()
	require.NoError(t, err)
	assert.Contains(t, f.Actions(), "delete pods")
}

// An ObjectStore deleted in the middle of its rollout: its StatefulSets
// are the tenant's and stay; held, they would never roll a change of the
// tenant's own again.
func TestAnObjectStoreGoneMidRolloutGivesItsStatefulSetsBack(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	s.Annotations[v1.RolloutAnnotation] = "2" // the tenant's own partition before the rollout
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	require.NoError(t, f.c.loop.Stores().Delete(f.store))
	f.ClearActions()

	require.NoError(t, f.c.loop.SyncKey(context.Background(), "t/s"))
	assert.Equal(t, []string{"patch statefulsets"}, f.Actions(), "no pod taken down, no status written")
	got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *got.Spec.UpdateStrategy.RollingUpdate.Partition, "the tenant's partition")
	assert.NotContains(t, got.Annotations, v1.RolloutAnnotation)

	// Nothing held: nothing written.
	require.NoError(t, f.sets.GetIndexer().Update(got))
	f.ClearActions()
	require.NoError(t, f.c.loop.SyncKey(context.Background(), "t/s"))
	assert.Empty(t, f.Actions())
}

func TestAnObjectStoreWithNothingToReplaceIsNotWritten(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	delete(s.Annotations, v1.RolloutAnnotation)
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	assert.Empty(t, f.Actions())
}

// Attack: a bare pod (no pod-name label, so not in the pod informer) of
// a name the held StatefulSet would give its pod. The rollout deleted
// whatever the API held by that name, with no precondition at all.
func TestAPodTheInformerDoesNotHoldIsNotDeleted(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	f := newFixture(t, s, pods)
	bare := pods["s-pool-0-1"].DeepCopy()
	bare.UID, bare.Labels, bare.OwnerReferences = "uid-bare", nil, nil
	_, err := f.Kube.CoreV1().Pods("t").Update(context.Background(), bare, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.pods.GetIndexer().Delete(pods["s-pool-0-1"]))
	f.ClearActions()

	_, err = f.sync()
	require.NoError(t, err)
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions(), "nothing deleted")
	got, err := f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-pool-0-1", metav1.GetOptions{})
	require.NoError(t, err, "the bare pod is still there")
	assert.Equal(t, types.UID("uid-bare"), got.UID)
	c := f.Condition(t, "t", "s")
	assert.Equal(t, ReasonReplacingPod, c.Reason)
	assert.Equal(t, "waiting for the statefulset controller to create pod s-pool-0-1 (0/2 pods current)", c.Message)
	assert.Zero(t, f.health.asked)
}

func TestPodsFromTheStartOrdinalAreTheOnesReplaced(t *testing.T) {
	s := heldSet("s-pool-0", 3, appsv1.OnDeleteStatefulSetStrategyType)
	s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-pool-0-7", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the highest ordinal, 7, is deleted: %v", err)

	s = heldSet("s-pool-0", 3, appsv1.RollingUpdateStatefulSetStrategyType)
	s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	f = newFixture(t, s, podsOf(s))
	_, err = f.sync()
	require.NoError(t, err)
	got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *got.Spec.UpdateStrategy.RollingUpdate.Partition, "the partition counts from start: 2 replaces s-pool-0-7")
}

// Attack: the tenant writes a partition to give back that no partition
// can hold. The patch that ends the rollout failed at every sync; the
// StatefulSet stayed held for good.
func TestAPartitionToGiveBackOutOfRangeDoesNotWedgeTheRollout(t *testing.T) {
	for _, forged := range []string{"99999999999", "-3", "2147483648", "one"} {
		t.Run(forged, func(t *testing.T) {
			s := heldSet("s-pool-0", 2, appsv1.RollingUpdateStatefulSetStrategyType)
			s.Annotations[v1.RolloutAnnotation] = forged
			pods := podsOf(s)
			replaced(pods, "s-pool-0-0", t0, true)
			replaced(pods, "s-pool-0-1", t0, true)
			f := newFixture(t, s, pods)
			_, err := f.sync()
			require.NoError(t, err)
			got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
			require.NoError(t, err)
			assert.NotContains(t, got.Annotations, v1.RolloutAnnotation, "the rollout is over")
			assert.Nil(t, got.Spec.UpdateStrategy.RollingUpdate.Partition, "no partition of the tenant's to give back")
			assert.Equal(t, ReasonPodsCurrent, f.Condition(t, "t", "s").Reason)
		})
	}
}

func TestTooManyReplicasAreReportedNotRolled(t *testing.T) {
	s := heldSet("s-pool-0", math.MaxInt32, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, nil)
	_, err := f.sync()
	require.NoError(t, err)
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions())
	c := f.Condition(t, "t", "s")
	assert.Equal(t, ReasonTooManyPods, c.Reason)
	assert.Zero(t, f.health.asked)
}

// A pod the partition hands to the statefulset controller already is not
// taken down again: MinIO is not asked, nothing is patched, nothing is
// counted replaced (each pod event did all three).
func TestAPodThePartitionHandedOverIsWaitedFor(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	three := int32(3)
	s.Spec.UpdateStrategy.RollingUpdate.Partition = &three
	f := newFixture(t, s, podsOf(s))
	_, err := f.sync()
	require.NoError(t, err)
	assert.Equal(t, []string{"patch objectstores/status"}, f.Actions())
	assert.Zero(t, f.health.asked)
	assert.Equal(t, "waiting for the statefulset controller to replace pod s-pool-0-3 (0/4 pods current)", f.Condition(t, "t", "s").Message)
	assert.Zero(t, promtestutil.ToFloat64(f.c.replaced))
}

// A rolling fallback runs another binary: MinIO refuses a node whose
// binary differs from its peers' (it compares their checksums at start),
// so one node at a time would never rejoin and the maintenance check
// would answer 412 for ever (seen on a real 4-node MinIO by
// BenchmarkAvailability). Its pods go together, without asking.
func TestANewBinaryReplacesEveryPodTogetherWithoutAsking(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			s := heldSet("s-pool-0", 4, strategy)
			s.Annotations[v1.RolloutAnnotation] = "all"
			f := newFixture(t, s, podsOf(s))
			f.health.err = fmt.Errorf("%w: 412", ErrNotNow)
			_, err := f.sync()
			require.NoError(t, err)
			assert.Zero(t, f.health.asked, "MinIO is not asked: no quorum survives a new binary one node at a time")
			pods, err := f.Kube.CoreV1().Pods("t").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, pods.Items, "every pod behind is deleted at once")
			if strategy == appsv1.RollingUpdateStatefulSetStrategyType {
				got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, int32(0), *got.Spec.UpdateStrategy.RollingUpdate.Partition, "the pods come back from the new template")
			}
			c := f.Condition(t, "t", "s")
			assert.Equal(t, ReasonReplacingPod, c.Reason)
			assert.Contains(t, c.Message, "replacing pods s-pool-0-0, s-pool-0-1, s-pool-0-2, s-pool-0-3 together")
		})
	}
}

// Finish is given namespace/name keys by the loop; one without a
// namespace would list every namespace's StatefulSets labelled for the
// name. Such keys, and odd ones, write nothing.
func TestFinishReachesNoOtherNamespace(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	other := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	other.Namespace = "victim"
	other.Annotations[v1.RolloutAnnotation] = "2"
	_, err := f.Kube.AppsV1().StatefulSets("victim").Create(context.Background(), other, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.sets.GetIndexer().Add(other))
	f.ClearActions()
	for _, key := range []string{"s", "/s", "", "t/", "a/b/c", "t/s/", "t/nonexistent", "nons/s"} {
		assert.NotPanics(t, func() { assert.NoError(t, f.c.Finish(context.Background(), key), key) })
	}
	assert.Empty(t, f.Actions(), "nothing written")
}

// The end of an in-place update is a status write, yet it queues the
// ObjectStore: a rollout waiting for it goes on at once. Other status
// writes (this controller's own condition) do not.
func TestTheEndOfAnUpdateQueuesTheRollout(t *testing.T) {
	base := fakeapi.UnstructuredObjectStore("t", "s", map[string]any{})
	base.SetResourceVersion("1")
	updating := base.DeepCopy()
	updating.SetResourceVersion("2")
	require.NoError(t, unstructured.SetNestedMap(updating.Object, map[string]any{"release": "RELEASE.2026-11-01T00-00-00Z"}, "status", "update"))
	ended := updating.DeepCopy()
	ended.SetResourceVersion("3")
	unstructured.RemoveNestedField(ended.Object, "status", "update")
	conditioned := updating.DeepCopy()
	conditioned.SetResourceVersion("4")
	require.NoError(t, unstructured.SetNestedSlice(conditioned.Object, []any{map[string]any{"type": v1.ConditionPodsCurrent}}, "status", "conditions"))

	assert.True(t, specChangedOrUpdateEnded(updating, ended), "the update ended")
	assert.False(t, specChangedOrUpdateEnded(base, updating), "an update beginning: the rollout holds already or has nothing to do")
	assert.False(t, specChangedOrUpdateEnded(updating, conditioned), "a condition written")
	assert.True(t, specChangedOrUpdateEnded(ended, ended), "a resync")
}

// TestAnAnswerFromAnotherNodeIsSaid: when the pod's own node could not
// be asked on its own (the tenant's Service does not lead to it), the
// condition says who answered.
func TestAnAnswerFromAnotherNodeIsSaid(t *testing.T) {
	s := heldSet("s-pool-1", 2, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.health.elsewhere = "asked through https://s-pool-0.t.svc:9000 as a whole: Service t/s-pool-0 has no ready endpoint of Pod s-pool-1-1"
	f.health.err = fmt.Errorf("412: %w", ErrNotNow)
	_, err := f.sync()
	require.NoError(t, err)
	c := f.Condition(t, "t", "s")
	assert.Equal(t, ReasonWaitingForQuorum, c.Reason)
	assert.Contains(t, c.Message, "pod s-pool-1-1 waits: 412: MinIO says no node may go down now (asked through https://s-pool-0.t.svc:9000 as a whole")
}
