package updates

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	objstatus "github.com/object-store-operator/operator/status"
)

// fieldManager owns, through server-side apply, exactly the status fields
// this controller writes: status.release, status.nodesOn, status.nodes, status.update,
// status.updatePhase, status.stopped and the VersionCurrent condition. Other controllers' conditions are never
// touched.
const fieldManager = "object-store-operator-updates"

// status is the part of an ObjectStore's status this controller owns.
type status struct {
	release string
	nodesOn string
	nodes   []v1.NodeRelease
	// phase is status.updatePhase.
	phase  string
	update *v1.UpdateStatus
	// stopped is status.stopped (stop.go).
	stopped *v1.StoppedUpdate
	cond    *metav1.Condition
}

func statusOf(store *v1.ObjectStore) status {
	s := status{release: store.Status.Release, nodesOn: store.Status.NodesOn, nodes: store.Status.Nodes,
		phase: store.Status.UpdatePhase, update: store.Status.Update, stopped: store.Status.Stopped}
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
	st := v1.ObjectStoreStatus{Release: s.release, NodesOn: s.nodesOn, Nodes: s.nodes, Update: s.update, UpdatePhase: s.phase, Stopped: s.stopped}
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

// seen is what the nodes said, for the status: the oldest release, how
// many run which, and each node's (nil nodes: not reached, nothing said).
func (s *status) seen(nodes []node) {
	if len(nodes) == 0 {
		return
	}
	s.release = oldest(nodes)
	count := map[string]int{}
	for _, n := range nodes {
		if n.release != "" {
			count[n.release]++
		}
	}
	most := ""
	for r, c := range count {
		// Ties go to the newer release: the one an update brings.
		if c > count[most] || (c == count[most] && r > most) {
			most = r
		}
	}
	s.nodesOn = ""
	if most != "" {
		s.nodesOn = fmt.Sprintf("%d/%d on %s", count[most], len(nodes), most)
	}
	s.nodes = make([]v1.NodeRelease, 0, min(len(nodes), v1.MaxListedNodes))
	for _, n := range nodes[:min(len(nodes), v1.MaxListedNodes)] {
		s.nodes = append(s.nodes, v1.NodeRelease{Endpoint: n.endpoint, Release: n.release})
	}
}
