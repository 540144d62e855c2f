// Package rollout replaces the pods of an ObjectStore whose StatefulSets
// the operator changed (new certificates to mount, the image of a rolling
// fallback): one pod at a time (spec.restarts.maxUnavailable), a Ready pod
// only when the tenant's MinIO says one more node may go down now
// (GET /minio/health/cluster?maintenance=true answers 200), and the next
// only once the pod before it is Ready again.
//
// It works the same under both StatefulSet strategies. Under OnDelete it
// deletes the pod, and the statefulset controller creates it again from
// the new template. Under RollingUpdate the writer of the template change
// holds the StatefulSet's partition at its replicas in the same patch
// (v1.HoldRollout), so the statefulset controller replaces nothing on its own; this
// package lowers the partition one ordinal at a time, and gives the
// tenant's own partition back once every pod is current.
//
// Only StatefulSets the operator changed carry v1.RolloutAnnotation, so a
// template change of the tenant's own (or the image set after an in-place
// update, whose pods already run the release) restarts nothing here.
package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// Reasons of the PodsCurrent condition.
const (
	ReasonPodsCurrent = "PodsCurrent"
	// ReasonReplacingPod: a pod is being replaced, or is being waited for
	// to become Ready.
	ReasonReplacingPod = "ReplacingPod"
	// ReasonWaitingForQuorum: MinIO answered 412 to the maintenance
	// check; taking a node down now would lose quorum.
	ReasonWaitingForQuorum = v1.PodsWaitingForQuorum
	// ReasonWaitingForUpdate: an in-place update of the tenant is in
	// flight (status.update): no pod is taken down until it ends.
	ReasonWaitingForUpdate = v1.PodsWaitingForUpdate
	// ReasonPodTimeout: a replaced pod did not become Ready in time; no
	// other pod is taken down until it is.
	ReasonPodTimeout = v1.PodsTimedOut
	// ReasonTooManyPods: the held StatefulSets have more replicas in all
	// than the rollout looks at (maxPods); no pod of theirs is replaced.
	ReasonTooManyPods = v1.PodsTooMany
)

// ReasonObjectStoreGone is logged, never set: a deleted ObjectStore's
// rollout ended and its StatefulSets got their own partition back.
const ReasonObjectStoreGone = "ObjectStoreGone"

// maxPods bounds the pods of one ObjectStore the rollout looks at, as
// updates bounds the nodes it reads: replicas is the tenant's to write, up
// to 2^31-1, and each is a name and a state built at every sync (a million
// took 19 s of a worker; 2^31 would take the operator's memory with it).
// MinIO's largest deployments have hundreds of nodes.
const maxPods = 4096

// verb is what a step does.
type verb int

const (
	// done: every pod runs the current template.
	done verb = iota
	// wait: a pod is not Ready yet, or the statefulset controller has not
	// caught up; the pods' next event looks again.
	wait
	// replace: take pod down (delete it, or lower the partition to its
	// ordinal), after the maintenance check when it is Ready.
	replace
	// stuck: a replaced pod is not Ready after the timeout, or the
	// StatefulSets are more than the rollout looks at (step.reason).
	stuck
	// replaceAll: take every pod behind down at once (step.pods): the
	// template runs another binary, which MinIO refuses beside its old
	// peers (v1.RolloutOf).
	replaceAll
)

// step is what to do next for one ObjectStore's pods.
type step struct {
	verb verb
	// set and pod are the pod to replace (replace) or waited for.
	set     *appsv1.StatefulSet
	pod     string
	ordinal int
	// uid is the pod to replace's (nil for one not created): a delete is
	// conditional on it.
	uid types.UID
	// ready: the pod to replace serves now, so MinIO is asked first.
	ready bool
	// reason is stuck's: ReasonPodTimeout or ReasonTooManyPods.
	reason string
	// after: look again then, for a timeout (wait).
	after   time.Duration
	message string
	// current / total: pods on the current template, for the message.
	current, total int
	// pods are replaceAll's: every pod behind, each with its set and UID.
	pods []podState
}

// podState is one ordinal of a StatefulSet as the pod informer holds it.
type podState struct {
	set  *appsv1.StatefulSet
	name string
	// ordinal counts from spec.ordinals.start, as the partition does.
	ordinal int
	pod     *corev1.Pod // nil: not created (yet), or not the StatefulSet's
	// foreign: a pod holds the name that the StatefulSet does not control
	// (a bare pod, or a forged owner reference).
	foreign bool
}

func (p podState) ready() bool {
	if p.pod == nil || p.pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// current: the pod exists and was created from the StatefulSet's update
// revision.
func (p podState) current() bool {
	return p.pod != nil && p.pod.DeletionTimestamp == nil &&
		p.pod.Labels[appsv1.StatefulSetRevisionLabel] == p.set.Status.UpdateRevision
}

// plan decides the next step for the StatefulSets the operator rolls
// (those with v1.RolloutAnnotation) from their pods. maxUnavailable bounds
// the pods not Ready at once; timeout how long a pod replaced from the
// current template has to become Ready.
func plan(sets []*appsv1.StatefulSet, pods map[string]*corev1.Pod, maxUnavailable int, timeout time.Duration, now time.Time) step {
	all, others, held := ordinals(sets, pods)
	if held != nil {
		return *held
	}
	st := step{total: len(all)}
	var unready []podState
	for _, p := range all {
		if p.current() {
			st.current++
		}
		if !p.ready() {
			unready = append(unready, p)
		}
	}
	if timedOut(&st, unready, timeout, now) {
		return st
	}
	behind := slices.DeleteFunc(slices.Clone(all), podState.current)
	if len(behind) > 0 && allAtOnce(sets) {
		// No quorum to keep: a node on the new binary never rejoins the
		// old ones, so one at a time would wait for ever.
		// A pod being deleted is on its way already: deleting it again
		// would count it twice.
		st.verb, st.pods = replaceAll, slices.DeleteFunc(behind, func(p podState) bool { return p.pod == nil || p.pod.DeletionTimestamp != nil })
		if len(st.pods) == 0 {
			st.verb, st.message = wait, fmt.Sprintf("waiting for the pods taken down to come back from the new template (%s)", progress(st))
		}
		return st
	}
	if len(behind) == 0 {
		if len(unready) > 0 {
			st.verb, st.set, st.pod = wait, unready[0].set, unready[0].name
			st.message = fmt.Sprintf("waiting for pod %s to become Ready", unready[0].name)
			return st
		}
		st.verb, st.message = done, fmt.Sprintf("all %d pods run the current template", st.total)
		return st
	}
	next := pick(behind)
	// A pod that serves nothing may go whatever the others do: it cannot
	// cost quorum, and it may be down for the very certificates it waits
	// for.
	// maxUnavailable counts every pod of the ObjectStore that is down,
	// those of StatefulSets it does not hold too (an OnDelete pool given
	// the image after an in-place update, say).
	down := slices.Clone(unready)
	for _, p := range others {
		if !p.ready() {
			down = append(down, p)
		}
	}
	if next.ready() && len(down) >= max(maxUnavailable, 1) {
		st.verb, st.set, st.pod = wait, down[0].set, down[0].name
		st.message = fmt.Sprintf("waiting for pod %s to become Ready before the next one (%s)", down[0].name, progress(st))
		return st
	}
	// Nothing to take down: the partition is at the pod already, so the
	// statefulset controller replaces it (asking MinIO, and counting it
	// replaced, once more would be for nothing); or there is no pod, and
	// the statefulset controller creates it from the current template. A
	// pod it does not control that holds the name is never deleted: it is
	// no pod of the StatefulSet's, whatever its name.
	if handed := !onDelete(next.set) && partition(next.set) <= int32(next.ordinal); handed || (next.pod == nil && onDelete(next.set)) {
		st.verb, st.set, st.pod = wait, next.set, next.name
		st.message = fmt.Sprintf("waiting for the statefulset controller to create pod %s (%s)", next.name, progress(st))
		if handed && next.pod != nil {
			st.message = fmt.Sprintf("waiting for the statefulset controller to replace pod %s (%s)", next.name, progress(st))
		}
		if next.foreign {
			st.message = fmt.Sprintf("pod %s is not StatefulSet %s's (it does not control it); the operator does not delete it, and the StatefulSet cannot create its own (%s)", next.name, next.set.Name, progress(st))
		}
		return st
	}
	st.verb, st.set, st.pod, st.ordinal, st.ready = replace, next.set, next.name, next.ordinal, next.ready()
	if next.pod != nil {
		st.uid = next.pod.UID
	}
	return st
}

// timedOut stops st at a pod replaced from the current template that did
// not get Ready within timeout: taking another one down could lose quorum
// for good. Otherwise st looks again when the first of them would time
// out.
func timedOut(st *step, unready []podState, timeout time.Duration, now time.Time) bool {
	if timeout <= 0 {
		return false
	}
	for _, p := range unready {
		if !p.current() {
			continue
		}
		age := now.Sub(p.pod.CreationTimestamp.Time)
		if age >= timeout {
			st.verb, st.reason, st.set, st.pod = stuck, ReasonPodTimeout, p.set, p.name
			st.message = fmt.Sprintf("pod %s was replaced %s ago and is not Ready; no other pod is taken down until it is", p.name, age.Round(time.Second))
			return true
		}
		if st.after == 0 || timeout-age < st.after {
			st.after = timeout - age
		}
	}
	return false
}

// ordinals lists the ordinals of the StatefulSets the operator holds, with
// the pod the informer has for each (nil when none, or one the
// StatefulSet does not control), and, as others, those of the
// ObjectStore's other StatefulSets (maxPods in all at most). A step is
// returned instead when the StatefulSets cannot be rolled now.
func ordinals(sets []*appsv1.StatefulSet, pods map[string]*corev1.Pod) (all, others []podState, _ *step) {
	for _, s := range sets {
		if _, ours := s.Annotations[v1.RolloutAnnotation]; !ours {
			if n := int(replicas(s)); len(all)+len(others)+n <= maxPods {
				others = append(others, podsOfSet(s, n, pods)...)
			}
			continue
		}
		if s.Status.ObservedGeneration < s.Generation || s.Status.UpdateRevision == "" {
			return nil, nil, &step{verb: wait, set: s, message: fmt.Sprintf("StatefulSet %s: waiting for the statefulset controller to see its new template", s.Name)}
		}
		n := int(replicas(s))
		if len(all)+n > maxPods {
			return nil, nil, &step{verb: stuck, reason: ReasonTooManyPods, set: s,
				message: fmt.Sprintf("StatefulSet %s: the StatefulSets the operator holds have more than %d replicas in all; it replaces none of their pods", s.Name, maxPods)}
		}
		all = append(all, podsOfSet(s, n, pods)...)
	}
	return all, others, nil
}

// podsOfSet are the n ordinals of StatefulSet s.
func podsOfSet(s *appsv1.StatefulSet, n int, pods map[string]*corev1.Pod) []podState {
	// Pods are named from spec.ordinals.start; the partition counts from
	// it (the statefulset controller's index, not the name's).
	start := 0
	if s.Spec.Ordinals != nil {
		start = int(s.Spec.Ordinals.Start)
	}
	out := make([]podState, 0, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", s.Name, start+i)
		p := podState{set: s, name: name, ordinal: i, pod: pods[name]}
		if p.pod != nil && !controlledBy(p.pod, s) {
			p.pod, p.foreign = nil, true
		}
		out = append(out, p)
	}
	return out
}

// controlledBy: p's controller is the StatefulSet s itself (by UID), not
// one of the same name before it, nor a forged reference to another.
func controlledBy(p *corev1.Pod, s *appsv1.StatefulSet) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "StatefulSet" && ref.Name == s.Name && ref.UID == s.UID
}

// allAtOnce: a held StatefulSet's pods run another binary than before.
func allAtOnce(sets []*appsv1.StatefulSet) bool {
	for _, s := range sets {
		if held, _, all := v1.RolloutOf(s); held && all {
			return true
		}
	}
	return false
}

// pick chooses the pod to replace next. Under RollingUpdate the partition
// replaces ordinals from the highest down, so the highest behind goes
// first; under OnDelete a pod not Ready goes first (it serves nothing),
// then the highest ordinal, as the statefulset controller would.
func pick(behind []podState) podState {
	slices.SortStableFunc(behind, func(a, b podState) int {
		if a.set.Name != b.set.Name {
			return strings.Compare(a.set.Name, b.set.Name)
		}
		if onDelete(a.set) && a.ready() != b.ready() {
			if !a.ready() {
				return -1
			}
			return 1
		}
		return b.ordinal - a.ordinal
	})
	return behind[0]
}

func progress(st step) string {
	return fmt.Sprintf("%d/%d pods current", st.current, st.total)
}

func replicas(s *appsv1.StatefulSet) int32 {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}

func onDelete(s *appsv1.StatefulSet) bool {
	return s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
}

// partition is the StatefulSet's rollingUpdate.partition (0 when unset).
func partition(s *appsv1.StatefulSet) int32 {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}

// Reasons are the reasons this package reports, with their remedies.
func Reasons() []reason.Reason {
	return []reason.Reason{
		{Name: ReasonPodsCurrent, Severity: reason.Normal},
		{Name: ReasonReplacingPod, Severity: reason.Normal},
		{Name: ReasonWaitingForQuorum, Severity: reason.Normal, Remedy: "nothing to do if MinIO is healing; otherwise see which of its nodes or drives are offline (mc admin info); a node that holds a whole erasure set is always refused: delete its pod yourself when its pool may go down"},
		{Name: ReasonWaitingForUpdate, Severity: reason.Normal},
		{Name: ReasonPodTimeout, Severity: reason.Warning, Remedy: "see why the pod is not Ready (kubectl describe pod); once it is, or once you delete it, the rollout goes on; spec.restarts.podTimeout or {restart-pod-timeout} sets the time"},
		{Name: ReasonTooManyPods, Severity: reason.Warning, Remedy: "lower the replicas of the ObjectStore's StatefulSets; or replace their pods yourself and remove the annotation aistor.min.io/rollout"},
		{Name: ReasonObjectStoreGone, Severity: reason.Normal},
	}
}
