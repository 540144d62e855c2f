package updates

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	objstatus "github.com/object-store-operator/operator/status"
)

// fieldManager owns, through server-side apply, exactly the status fields
// this controller writes: status.release, status.update,
// status.updatePhase, status.stopped and the VersionCurrent condition. Other controllers' conditions are never
// touched.
const fieldManager = "object-store-operator-updates"

// status is the part of an ObjectStore's status this controller owns.
type status struct {
	release string
	// phase is status.updatePhase.
	phase  string
	update *v1.UpdateStatus
	// stopped is status.stopped (stop.go).
	stopped *v1.StoppedUpdate
	cond    *metav1.Condition
}

func statusOf(store *v1.ObjectStore) status {
	s := status{release: store.Status.Release, phase: store.Status.UpdatePhase, update: store.Status.Update, stopped: store.Status.Stopped}
	if c := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionVersionCurrent); c != nil {
		cc := *c
		s.cond = &cc
	}
	return s
}

// setCondition sets the condition as of now (status.Next): MinIO's own
// words in the message are bounded here, before any comparison with what
// the ObjectStore carries.
func (s *status) setCondition(c metav1.Condition, now time.Time) {
	c = objstatus.Next(s.cond, c, now)
	s.cond = &c
}

// fields is the status as this controller applies it: exactly the fields
// it owns.
func (s status) fields() v1.ObjectStoreStatus {
	st := v1.ObjectStoreStatus{Release: s.release, Update: s.update, UpdatePhase: s.phase, Stopped: s.stopped}
	if s.cond != nil {
		st.Conditions = []metav1.Condition{*s.cond}
	}
	return st
}

// apply writes want over have (what the ObjectStore carries) through the
// one condition writer (status.Writer): when they differ, or always;
// conditional on resourceVersion when it is set (see Controller.write and
// startCall).
func (c *Controller) apply(ctx context.Context, store *v1.ObjectStore, have, want status, resourceVersion string, always bool) error {
	_, err := c.status.Write(ctx, store, have.fields(), want.fields(), objstatus.Options{ResourceVersion: resourceVersion, Always: always})
	return err
}
