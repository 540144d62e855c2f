package updates

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	objstatus "github.com/object-store-operator/operator/status"
)

// fieldManager owns, through server-side apply, exactly the status fields
// this controller writes: status.release, status.update and the
// VersionCurrent condition. Other controllers' conditions are never
// touched.
const fieldManager = "object-store-operator-updates"

// status is the part of an ObjectStore's status this controller owns.
type status struct {
	release string
	// phase is status.updatePhase.
	phase  string
	update *v1.UpdateStatus
	cond   *metav1.Condition
}

func statusOf(store *v1.ObjectStore) status {
	s := status{release: store.Status.Release, phase: store.Status.UpdatePhase, update: store.Status.Update}
	if c := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionVersionCurrent); c != nil {
		cc := *c
		s.cond = &cc
	}
	return s
}

func (s *status) condition() *metav1.Condition { return s.cond }

// setCondition sets the condition as of now (status.Next): MinIO's own
// words in the message are bounded here, before any comparison with what
// the ObjectStore carries.
func (s *status) setCondition(c metav1.Condition, now time.Time) {
	c = objstatus.Next(s.cond, c, now)
	s.cond = &c
}

func (s status) equal(o status) bool {
	if s.release != o.release || s.phase != o.phase || (s.update == nil) != (o.update == nil) || (s.cond == nil) != (o.cond == nil) {
		return false
	}
	if s.update != nil && !s.update.Equal(*o.update) {
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
	reasons  reason.Set
}

// write applies want over have (what the ObjectStore carries, updated on
// success) when they differ, conditional on resourceVersion when it is
// set (see Controller.write).
func (w *statusWriter) write(ctx context.Context, u *unstructured.Unstructured, have *status, want status, resourceVersion string) error {
	return w.apply(ctx, u, have, want, resourceVersion, false)
}

// writeAt applies want whether or not it differs, conditional on
// resourceVersion: the apiserver refuses it with a conflict when the
// object changed since, which is how a call is recorded exactly once.
func (w *statusWriter) writeAt(ctx context.Context, u *unstructured.Unstructured, have *status, want status, resourceVersion string) error {
	return w.apply(ctx, u, have, want, resourceVersion, true)
}

func (w *statusWriter) apply(ctx context.Context, u *unstructured.Unstructured, have *status, want status, resourceVersion string, always bool) error {
	if want.cond != nil {
		want.cond.ObservedGeneration = u.GetGeneration()
		if want.cond.LastTransitionTime.IsZero() {
			want.cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
		}
	}
	if have.equal(want) && !always {
		return nil
	}
	st := &v1.ObjectStoreStatus{Release: want.release, Update: want.update, UpdatePhase: want.phase}
	if want.cond != nil {
		st.Conditions = []metav1.Condition{*want.cond}
	}
	if err := objstatus.ApplyAt(ctx, w.client, fieldManager, u, st, resourceVersion); err != nil {
		return err
	}
	changed := want.cond != nil && (have.cond == nil || have.cond.Reason != want.cond.Reason || have.cond.Status != want.cond.Status)
	if changed && w.recorder != nil {
		w.recorder.Event(u, string(w.reasons.Severity(want.cond.Reason)), want.cond.Reason, want.cond.Message)
	}
	*have = want
	return nil
}
