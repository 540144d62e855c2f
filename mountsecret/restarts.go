package mountsecret

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/fairshare"
	"github.com/object-store-operator/operator/internal/window"
)

// A tenant's certificate restart waits for a pause (ReasonRestartsPaused),
// its window (ReasonOutsideWindow) or a slot (ReasonRestartQueued): the
// CertificatesReady reason (False) while it does. The generated Secret
// and the pods are left as they were, so a held tenant keeps one
// consistent set of certificates.

// hold is why a restart may not start now, and when to look again (0:
// when something else queues the key: the annotation removed, a slot
// freed).
type hold struct {
	reason  string
	message string
	after   time.Duration
}

// holdRestart decides whether a tenant whose certificates changed may
// restart now, before a slot is asked for: a pause holds it, then a
// closed window (spec.updates.window, the one its updates keep too), as
// the window's Gate answers for every kind of work. nil: ask for a slot.
func holdRestart(paused bool, w *window.Spec, now time.Time, changed string) *hold {
	gate := window.Gate{Work: "restarts", Field: "spec.updates.window",
		PauseAnnotation: v1.RestartsPausedAnnotation, PauseReason: ReasonRestartsPaused}
	closed := gate.Check(paused, w, now)
	if closed == nil {
		return nil
	}
	return &hold{reason: closed.Reason, message: changed + "; " + closed.Message, after: closed.After}
}

// restarts holds how many tenants restart their pods at once. A tenant
// holds a slot from the patch of its StatefulSets until every one of them
// has rolled out and is ready again, or until timeout: a tenant whose
// pods never become ready (its own doing) holds a slot no longer than
// that, so it cannot stop the fleet's rotations. While other namespaces
// restart or wait, a namespace takes no more than its share of the slots
// (max over the namespaces running or waiting, rounded up): one tenant's
// many ObjectStores cannot take every slot that frees. Keys that found no
// slot are queued again when one frees. The slots are a
// fairshare.Scheduler; this adds the timeout.
type restarts struct {
	max     int // 0: no limit
	timeout time.Duration
	clock   clock.PassiveClock
	slots   *fairshare.Scheduler
	// unitOf names whose share a key's restart counts against (nil: its
	// namespace's).
	unitOf func(key string) string
}

func newRestarts(max int, timeout time.Duration, clk clock.PassiveClock, enqueue func(string), unitOf func(string) string) *restarts {
	if unitOf == nil {
		unitOf = namespaceOf
	}
	return &restarts{max: max, timeout: timeout, clock: clk, unitOf: unitOf, slots: fairshare.New(fairshare.Options{
		Total: max, Share: true, Wake: enqueue, Clock: clk,
	})}
}

func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// begin takes a slot for key (it keeps the one it has); false, with who
// holds the slots, when every slot is taken or key's namespace holds its
// share (it then waits for its own namespace's): key is queued again when
// one frees.
func (r *restarts) begin(key string) (bool, []string) {
	ok, refused := r.slots.Acquire(fairshare.Holder{Key: key, Party: r.unitOf(key)}, nil)
	return ok, refused.Holders
}

// forget drops key from the waiting: it no longer needs a slot.
func (r *restarts) forget(key string) { r.slots.Unwait(key) }

// since is when key's restart began; false when it holds no slot.
func (r *restarts) since(key string) (time.Time, bool) {
	h, ok := r.slots.Holding(key)
	return h.Since, ok
}

// expired tells whether a restart that began at start has held its slot
// for the timeout.
func (r *restarts) expired(start time.Time) bool {
	return r.timeout > 0 && r.clock.Since(start) >= r.timeout
}

// end frees key's slot (or forgets it waiting) and queues the keys that
// waited for one; it says how many did.
func (r *restarts) end(key string) int { return r.slots.Release(key) }

// reset forgets every slot: a new leadership term counts afresh from the
// StatefulSets (adopt).
func (r *restarts) reset() { r.slots.Reset() }

// queuedMessage says what a tenant waits for, naming a few holders.
func queuedMessage(changed string, max int, holders []string, namespace string) string {
	const shown = 5
	var own []string
	others := 0
	for _, h := range holders {
		if ns, _, _ := strings.Cut(h, "/"); ns == namespace {
			own = append(own, h)
		} else {
			others++ // no tenant reads another's names
		}
	}
	more := ""
	if len(own) > shown {
		more = fmt.Sprintf(" and %d more", len(own)-shown)
		own = own[:shown]
	}
	by := strings.Join(own, ", ") + more
	switch {
	case by == "":
		by = fmt.Sprintf("%d ObjectStores of other namespaces", others)
	case others > 0:
		by += fmt.Sprintf(", and %d ObjectStores of other namespaces", others)
	}
	return fmt.Sprintf("%s; waiting for one of %d restart slots (held by %s until their pods are ready again)", changed, max, by)
}

// rolledOut tells whether a StatefulSet has rolled its pods to the
// template carrying restart and has them all ready: the end of a restart.
// The cache may not have seen the patch yet: a template without restart
// has not rolled out.
func rolledOut(s *appsv1.StatefulSet, restart string) bool {
	return s.Spec.Template.Annotations[RestartAnnotation] == restart && settled(s)
}

// settled tells whether a StatefulSet runs its current template on every
// replica, all ready.
func settled(s *appsv1.StatefulSet) bool {
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	return s.Status.ObservedGeneration >= s.Generation &&
		s.Status.UpdatedReplicas == replicas && s.Status.ReadyReplicas == replicas &&
		(s.Status.UpdateRevision == "" || s.Status.CurrentRevision == s.Status.UpdateRevision)
}

// rolling tells whether a StatefulSet's rollout has not finished: the
// statefulset controller has not seen its template, or has not moved
// every replica to it with all ready (it sets currentRevision to
// updateRevision only then). A finished rollout whose pods later stop
// being ready is not a restart.
func rolling(s *appsv1.StatefulSet) bool {
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	return s.Status.ObservedGeneration < s.Generation || s.Status.UpdatedReplicas < replicas ||
		(s.Status.UpdateRevision != "" && s.Status.CurrentRevision != s.Status.UpdateRevision)
}

// windowOf is the tenant's maintenance window, nil when it has none.
func windowOf(store *v1.ObjectStore) *window.Spec {
	if w := store.Spec.Updates.Window; w != nil {
		return &window.Spec{Schedule: w.Schedule, Duration: w.Duration}
	}
	return nil
}

// adoptRestarts counts, at the start of a term, the tenants a previous
// leader restarted whose rollout has not finished yet: they hold slots.
// A tenant can forge what such a restart looks like (its StatefulSets,
// their labels and annotations are its own), so a restart is adopted only
// for an ObjectStore that exists, and within the limits a restart begun
// now keeps: the total, and each namespace with restarts left rolling
// its share of it, taken in turn. A restart not adopted rolls on
// uncounted; it only does not keep a tenant that needs a slot waiting.
func (c *Controller) adoptRestarts() {
	c.restarts.reset()
	sets, err := c.sets.List(labels.Everything()) // the informer holds only labelled StatefulSets
	if err != nil {
		return
	}
	byUnit := map[string][]string{}
	for _, s := range sets {
		name := objectStoreOf(s)
		if name == "" || s.Spec.Template.Annotations[RestartAnnotation] == "" || !rolling(s) {
			continue
		}
		key := s.Namespace + "/" + name
		unit := c.restarts.unitOf(key)
		if _, exists, err := c.stores.GetByKey(key); err != nil || !exists || slices.Contains(byUnit[unit], key) {
			continue
		}
		byUnit[unit] = append(byUnit[unit], key)
	}
	for _, key := range c.restarts.slots.AdoptFound(byUnit, nil) {
		// Nothing else may sync key again (pods that never get ready):
		// the timeout must.
		if c.restarts.timeout > 0 {
			c.queue.AddAfter(key, c.restarts.timeout)
		}
	}
}

// holdRestart says why key may not restart now, nil once it holds a
// restart slot. yielded: key's slot just timed out while others waited.
func (c *Controller) holdRestart(key string, store *v1.ObjectStore, changed string, yielded bool) *hold {
	now := c.restarts.clock.Now()
	if h := holdRestart(store.Annotations[v1.RestartsPausedAnnotation] == "true", windowOf(store), now, changed); h != nil {
		c.restarts.end(key) // a held tenant waits for no slot
		return h
	}
	if yielded {
		// The waiting tenants go first, or a tenant whose StatefulSets
		// keep falling behind (its own edits, a GitOps tool reverting
		// the annotation) would take the slot it just gave up again,
		// forever. Queued after them, it asks for a slot like them.
		c.queue.Add(key)
		return &hold{reason: ReasonRestartQueued, message: fmt.Sprintf(
			"%s; the previous restart was not ready within %s: its slot went to a waiting tenant", changed, c.restarts.timeout)}
	}
	if ok, holders := c.restarts.begin(key); !ok {
		return &hold{reason: ReasonRestartQueued, message: queuedMessage(changed, c.restarts.max, holders, store.Namespace)}
	}
	// Looked at again when the slot times out, whatever happens next: the
	// writes that follow may fail, and their retries back off for minutes.
	if start, ok := c.restarts.since(key); ok && c.restarts.timeout > 0 {
		c.queue.AddAfter(key, start.Add(c.restarts.timeout).Sub(now))
	}
	return nil
}

// expireRestart frees key's restart slot once it held it for the
// timeout; true when tenants waited for it.
func (c *Controller) expireRestart(u *unstructured.Unstructured) bool {
	key := u.GetNamespace() + "/" + u.GetName()
	start, ok := c.restarts.since(key)
	if !ok || !c.restarts.expired(start) {
		return false
	}
	c.log.Warn().Str("objectstore", key).Str("reason", ReasonRestartTimeout).Stringer("after", c.restarts.timeout).
		Msg("the pods did not become ready again in time; the restart slot goes to the next tenant")
	c.cfg.Recorder.Eventf(u, corev1.EventTypeWarning, ReasonRestartTimeout,
		"the pods did not become ready within %s of their restart; the next tenant may restart", c.restarts.timeout)
	return c.restarts.end(key) > 0
}

// endRestart frees key's restart slot once its StatefulSets have rolled
// out to restart and are ready.
func (c *Controller) endRestart(u *unstructured.Unstructured, sets []*appsv1.StatefulSet, restart string) {
	key := u.GetNamespace() + "/" + u.GetName()
	if _, ok := c.restarts.since(key); !ok {
		return
	}
	for _, s := range sets {
		if !rolledOut(s, restart) {
			return
		}
	}
	c.restarts.end(key)
}
