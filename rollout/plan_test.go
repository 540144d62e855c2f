package rollout

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/object-store-operator/operator/api/v1"
)

var t0 = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

// heldSet is a StatefulSet of n pods whose template the operator changed
// (revision "new"), under strategy.
func heldSet(name string, n int32, strategy appsv1.StatefulSetUpdateStrategyType) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", UID: types.UID("uid-" + name), Generation: 2, ResourceVersion: "7",
			Labels: map[string]string{v1.ObjectStoreLabel: "s"}, Annotations: map[string]string{v1.RolloutAnnotation: ""}},
		Spec:   appsv1.StatefulSetSpec{Replicas: &n, UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: strategy}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, CurrentRevision: "old", UpdateRevision: "new"},
	}
	if strategy == appsv1.RollingUpdateStatefulSetStrategyType {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: &n}
	}
	return s
}

// podsOf are the set's pods, all Ready on revision "old", named from
// its spec.ordinals.start.
func podsOf(s *appsv1.StatefulSet) map[string]*corev1.Pod {
	pods := map[string]*corev1.Pod{}
	start := int32(0)
	if s.Spec.Ordinals != nil {
		start = s.Spec.Ordinals.Start
	}
	for i := range *s.Spec.Replicas {
		name := fmt.Sprintf("%s-%d", s.Name, start+i)
		pods[name] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", UID: types.UID("uid-old-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
				Labels:          map[string]string{appsv1.StatefulSetRevisionLabel: "old"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	return pods
}

// replaced is pod name as the statefulset controller created it again
// at created from revision "new", Ready or not.
func replaced(pods map[string]*corev1.Pod, name string, created time.Time, ready bool) {
	p := pods[name].DeepCopy()
	p.UID = types.UID("uid-new-" + name)
	p.CreationTimestamp = metav1.NewTime(created)
	p.Labels = map[string]string{appsv1.StatefulSetRevisionLabel: "new"}
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if ready {
		p.Status.Conditions[0].Status = corev1.ConditionTrue
	}
	pods[name] = p
}

func notReady(pods map[string]*corev1.Pod, name string) {
	pods[name].Status.Conditions[0].Status = corev1.ConditionFalse
}

func TestOnePodAtATimeFromTheHighestOrdinalEachAfterTheOneBeforeIsReady(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			s := heldSet("s-pool-0", 4, strategy)
			pods := podsOf(s)
			sets := []*appsv1.StatefulSet{s}
			var order []string
			for i := 3; i >= 0; i-- {
				st := plan(sets, pods, 1, 10*time.Minute, t0)
				if !assert.Equal(t, replace, st.verb, st.message) {
					return
				}
				assert.True(t, st.ready, "a serving pod is taken down only after MinIO is asked")
				order = append(order, st.pod)

				replaced(pods, st.pod, t0, false)
				st = plan(sets, pods, 1, 10*time.Minute, t0.Add(time.Minute))
				assert.Equal(t, wait, st.verb, "no second pod while %s is not Ready", st.pod)
				assert.Contains(t, st.message, st.pod)
				assert.Equal(t, 9*time.Minute, st.after, "looked at again when its timeout runs out")
				replaced(pods, st.pod, t0, true)
			}
			assert.Equal(t, []string{"s-pool-0-3", "s-pool-0-2", "s-pool-0-1", "s-pool-0-0"}, order)
			st := plan(sets, pods, 1, 10*time.Minute, t0)
			assert.Equal(t, done, st.verb)
			assert.Equal(t, "all 4 pods run the current template", st.message)
		})
	}
}

func TestAPodThatServesNothingGoesFirstAndWithoutAsking(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	notReady(pods, "s-pool-0-1")
	st := plan([]*appsv1.StatefulSet{s}, pods, 1, 10*time.Minute, t0)
	assert.Equal(t, replace, st.verb, "a down pod costs no quorum, and may be down for the certificates it waits for")
	assert.Equal(t, "s-pool-0-1", st.pod)
	assert.False(t, st.ready, "MinIO is not asked about a pod that serves nothing")
}

func TestAServingPodWaitsWhileAnotherIsDown(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	pods := podsOf(s)
	replaced(pods, "s-pool-0-3", t0, true)
	notReady(pods, "s-pool-0-0") // the tenant's own trouble, on the old template
	st := plan([]*appsv1.StatefulSet{s}, pods, 1, 10*time.Minute, t0)
	assert.Equal(t, wait, st.verb, "maxUnavailable 1: one pod down already")
	assert.Contains(t, st.message, "s-pool-0-0")

	st = plan([]*appsv1.StatefulSet{s}, pods, 2, 10*time.Minute, t0)
	assert.Equal(t, replace, st.verb, "maxUnavailable 2 lets one more go")
	assert.Equal(t, "s-pool-0-2", st.pod, "the partition replaces the highest ordinal behind")
}

func TestAReplacedPodThatNeverGetsReadyStopsTheRollout(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	replaced(pods, "s-pool-0-3", t0, false)
	st := plan([]*appsv1.StatefulSet{s}, pods, 1, 10*time.Minute, t0.Add(10*time.Minute))
	assert.Equal(t, stuck, st.verb)
	assert.Equal(t, "s-pool-0-3", st.pod)
	assert.Equal(t, "pod s-pool-0-3 was replaced 10m0s ago and is not Ready; no other pod is taken down until it is", st.message)

	st = plan([]*appsv1.StatefulSet{s}, pods, 3, 10*time.Minute, t0.Add(10*time.Minute))
	assert.Equal(t, stuck, st.verb, "whatever maxUnavailable allows")
}

func TestOnlyStatefulSetsTheOperatorChangedAreRolled(t *testing.T) {
	ours := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	theirs := heldSet("s-pool-1", 2, appsv1.OnDeleteStatefulSetStrategyType)
	delete(theirs.Annotations, v1.RolloutAnnotation) // an image set after an in-place update, or the tenant's own edit
	pods := podsOf(ours)
	for k, p := range podsOf(theirs) {
		pods[k] = p
	}
	st := plan([]*appsv1.StatefulSet{ours, theirs}, pods, 1, time.Minute, t0)
	assert.Equal(t, "s-pool-0-1", st.pod)
	replaced(pods, "s-pool-0-1", t0, true)
	replaced(pods, "s-pool-0-0", t0, true)
	st = plan([]*appsv1.StatefulSet{ours, theirs}, pods, 1, time.Minute, t0)
	assert.Equal(t, done, st.verb, "pods of a StatefulSet the operator did not change are left running")
	assert.Equal(t, 2, st.total)
}

func TestNothingIsTakenDownBeforeTheStatefulSetControllerSawTheTemplate(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	s.Status.ObservedGeneration = 1
	st := plan([]*appsv1.StatefulSet{s}, podsOf(s), 1, time.Minute, t0)
	assert.Equal(t, wait, st.verb, "its update revision is not the new template's yet")
}

func TestHoldKeepsTheStatefulSetControllerFromRollingAndRemembersThePartition(t *testing.T) {
	four := int32(4)
	rolling := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: &four,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}}
	annotations, spec := v1.HoldRollout(rolling, false)
	assert.Equal(t, map[string]string{v1.RolloutAnnotation: ""}, annotations, "no partition of the tenant's to give back")
	assert.Equal(t, map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"partition": int32(4)}}}, spec)

	two := int32(2)
	rolling.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: &two}
	annotations, _ = v1.HoldRollout(rolling, false)
	assert.Equal(t, "2", annotations[v1.RolloutAnnotation], "the tenant's own partition is given back at the end")

	rolling.Annotations = map[string]string{v1.RolloutAnnotation: "1"}
	annotations, _ = v1.HoldRollout(rolling, false)
	assert.Equal(t, "1", annotations[v1.RolloutAnnotation], "held already: what it recorded first stays")

	annotations, _ = v1.HoldRollout(rolling, true)
	assert.Equal(t, "all,1", annotations[v1.RolloutAnnotation], "a new binary: replaced together, the partition still recorded")
	rolling.Annotations = annotations
	annotations, _ = v1.HoldRollout(rolling, false)
	assert.Equal(t, "all,1", annotations[v1.RolloutAnnotation], "together until the rollout ends, whatever changes meanwhile")
	held, restore, all := v1.RolloutOf(rolling)
	assert.True(t, held)
	assert.Equal(t, "1", restore)
	assert.True(t, all)

	onDelete := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: &four,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}
	annotations, spec = v1.HoldRollout(onDelete, false)
	assert.Equal(t, map[string]string{v1.RolloutAnnotation: ""}, annotations)
	assert.Nil(t, spec, "under OnDelete nothing rolls on its own")
}

// Attack: replicas is the tenant's to write, up to 2^31-1, on a
// StatefulSet it labels and annotates aistor.min.io/rollout itself. Each
// was a name and a state built at every sync: a million took 19 s of a
// worker, 2^31 the operator's memory, every tenant's rollouts with it.
func TestStatefulSetsOfAbsurdReplicasAreRefusedNotEnumerated(t *testing.T) {
	for _, n := range []int32{math.MaxInt32, maxPods + 1} {
		s := heldSet("s-pool-0", n, appsv1.OnDeleteStatefulSetStrategyType)
		st := plan([]*appsv1.StatefulSet{s}, map[string]*corev1.Pod{}, 1, time.Minute, t0)
		assert.Equal(t, stuck, st.verb, "replicas %d", n)
		assert.Equal(t, ReasonTooManyPods, st.reason)
		assert.Equal(t, "StatefulSet s-pool-0: the StatefulSets the operator holds have more than 4096 replicas in all; it replaces none of their pods", st.message)
	}
	// In all, not each: a thousand StatefulSets of 4096 are as many.
	a := heldSet("s-pool-0", maxPods/2+1, appsv1.OnDeleteStatefulSetStrategyType)
	b := heldSet("s-pool-1", maxPods/2, appsv1.OnDeleteStatefulSetStrategyType)
	st := plan([]*appsv1.StatefulSet{a, b}, map[string]*corev1.Pod{}, 1, time.Minute, t0)
	assert.Equal(t, ReasonTooManyPods, st.reason)

	b = heldSet("s-pool-1", maxPods/2-1, appsv1.OnDeleteStatefulSetStrategyType)
	st = plan([]*appsv1.StatefulSet{a, b}, podsOf(a), 1, time.Minute, t0)
	assert.Equal(t, wait, st.verb, "%d pods are looked at: %s", maxPods, st.message)
}

// spec.ordinals.start names the pods from start; the partition counts from
// it (the statefulset controller's index). Counting names from 0 found no
// pod at all: the rollout deleted pods that do not exist, and never ended.
func TestPodsAreNamedFromTheStartOrdinal(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			s := heldSet("s-pool-0", 3, strategy)
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
			pods := podsOf(s)
			sets := []*appsv1.StatefulSet{s}
			var order []string
			var ordinals []int
			for range 3 {
				st := plan(sets, pods, 1, 10*time.Minute, t0)
				if !assert.Equal(t, replace, st.verb, st.message) {
					return
				}
				assert.True(t, st.ready)
				assert.Equal(t, types.UID("uid-old-"+st.pod), st.uid)
				order, ordinals = append(order, st.pod), append(ordinals, st.ordinal)
				replaced(pods, st.pod, t0, true)
			}
			assert.Equal(t, []string{"s-pool-0-7", "s-pool-0-6", "s-pool-0-5"}, order)
			assert.Equal(t, []int{2, 1, 0}, ordinals, "the partition is the index from start")
			assert.Equal(t, done, plan(sets, pods, 1, 10*time.Minute, t0).verb)
		})
	}
}

// Attack: a pod the StatefulSet does not control holds one of its names
// (a bare pod, or one whose owner reference the tenant forged): the
// rollout never takes it down, nor counts it as the StatefulSet's.
func TestAPodTheStatefulSetDoesNotControlIsNeverTakenDown(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	other := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	other.UID = "uid-of-a-set-deleted-since"
	for name, owners := range map[string][]metav1.OwnerReference{
		"bare":   nil,
		"forged": {*metav1.NewControllerRef(other, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		"job":    {{APIVersion: "batch/v1", Kind: "Job", Name: "s-pool-0", UID: s.UID, Controller: ptr(true)}},
	} {
		t.Run(name, func(t *testing.T) {
			pods := podsOf(s)
			pods["s-pool-0-1"].OwnerReferences = owners
			st := plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
			assert.Equal(t, wait, st.verb)
			assert.Equal(t, "s-pool-0-1", st.pod)
			assert.Equal(t, "pod s-pool-0-1 is not StatefulSet s-pool-0's (it does not control it); the operator does not delete it, and the StatefulSet cannot create its own (0/2 pods current)", st.message)
		})
	}
}

// A pod not created yet is nothing to delete: the statefulset controller
// creates it from the current template. Under RollingUpdate the partition
// still comes down to it, so that it is.
func TestAPodNotCreatedIsWaitedForNotDeleted(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	delete(pods, "s-pool-0-1")
	st := plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
	assert.Equal(t, wait, st.verb)
	assert.Equal(t, "waiting for the statefulset controller to create pod s-pool-0-1 (0/2 pods current)", st.message)

	s = heldSet("s-pool-0", 2, appsv1.RollingUpdateStatefulSetStrategyType)
	st = plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
	assert.Equal(t, replace, st.verb, "the partition 2 keeps it on the old template: lowered to 1")
	assert.Equal(t, 1, st.ordinal)
	assert.False(t, st.ready, "a pod that is not there serves nothing")

	one := int32(1)
	s.Spec.UpdateStrategy.RollingUpdate.Partition = &one
	st = plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
	assert.Equal(t, wait, st.verb, "lowered already")
}

func ptr[T any](v T) *T { return &v }

func TestPodsOfANewBinaryGoTogetherAndOnce(t *testing.T) {
	s := heldSet("s-pool-0", 3, appsv1.OnDeleteStatefulSetStrategyType)
	s.Annotations[v1.RolloutAnnotation] = "all"
	pods := podsOf(s)
	st := plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
	assert.Equal(t, replaceAll, st.verb)
	assert.Len(t, st.pods, 3, "every pod behind at once, whatever maxUnavailable says")

	for _, p := range pods {
		p.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	st = plan([]*appsv1.StatefulSet{s}, pods, 1, time.Minute, t0)
	assert.Equal(t, wait, st.verb, "pods on their way out are not taken down again")
	assert.Contains(t, st.message, "waiting for the pods taken down to come back")
}
