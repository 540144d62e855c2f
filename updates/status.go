package updates

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// fieldManager owns, through server-side apply, exactly the status fields
// this controller writes: status.release, status.update and the
// VersionCurrent condition. Other controllers' conditions are never
// touched.
const fieldManager = "object-store-operator-updates"

// status is the part of an ObjectStore's status this controller owns.
type status struct {
	release string
	update  *v1.UpdateStatus
	cond    *metav1.Condition
}

func statusOf(store *v1.ObjectStore) status {
	s := status{release: store.Status.Release, update: store.Status.Update}
	if c := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionVersionCurrent); c != nil {
		cc := *c
		s.cond = &cc
	}
	return s
}

func (s *status) condition() *metav1.Condition { return s.cond }

// setCondition sets the condition, keeping the transition time while its
// status stays.
func (s *status) setCondition(c metav1.Condition) {
	if s.cond != nil && s.cond.Status == c.Status {
		c.LastTransitionTime = s.cond.LastTransitionTime
	}
	s.cond = &c
}

func (s status) equal(o status) bool {
	if s.release != o.release || (s.update == nil) != (o.update == nil) || (s.cond == nil) != (o.cond == nil) {
		return false
	}
	if s.update != nil && *s.update != *o.update {
		return false
	}
	return s.cond == nil || (s.cond.Status == o.cond.Status && s.cond.Reason == o.cond.Reason &&
		s.cond.Message == o.cond.Message && s.cond.ObservedGeneration == o.cond.ObservedGeneration)
}

// statusWriter applies a status when it differs from the last one seen
// and records an Event when the condition's reason or status changes.
type statusWriter struct {
	client   dynamic.Interface
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// write applies want over have (what the ObjectStore carries, updated on
// success).
func (w *statusWriter) write(ctx context.Context, u *unstructured.Unstructured, have *status, want status) error {
	if want.cond != nil {
		want.cond.ObservedGeneration = u.GetGeneration()
		if want.cond.LastTransitionTime.IsZero() {
			want.cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
		}
	}
	if have.equal(want) {
		return nil
	}
	st := &v1.ObjectStoreStatus{Release: want.release, Update: want.update}
	if want.cond != nil {
		st.Conditions = []metav1.Condition{*want.cond}
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind,
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"status":   raw,
	}}
	if _, err := w.client.Resource(v1.Resource).Namespace(u.GetNamespace()).ApplyStatus(ctx, u.GetName(), apply,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply status of ObjectStore %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	changed := want.cond != nil && (have.cond == nil || have.cond.Reason != want.cond.Reason || have.cond.Status != want.cond.Status)
	if changed && w.recorder != nil {
		eventType := corev1.EventTypeWarning
		if want.cond.Status == metav1.ConditionTrue || want.cond.Reason == ReasonUpdatingInPlace || want.cond.Reason == ReasonWaitingForBinary {
			eventType = corev1.EventTypeNormal
		}
		w.recorder.Event(u, eventType, want.cond.Reason, want.cond.Message)
	}
	*have = want
	return nil
}
