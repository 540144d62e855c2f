package updates

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	objstatus "github.com/object-store-operator/operator/status"
)

// act does what decide chose and writes the status it leads to.
func (c *Controller) act(ctx context.Context, key string, u *unstructured.Unstructured, store *v1.ObjectStore, o observation, t *tenant, a action) error {
	if a.verb == retry {
		return c.retryError(key, o)
	}
	msg := a.message
	if a.cause != "" {
		msg = c.withRemedy(msg, a.cause, a.reason)
	}
	switch a.verb {
	case setImage, roll:
		a, msg = c.changeSets(ctx, key, store, a, msg)
	case call:
		return c.startCall(ctx, key, u, store, o, t, a, msg)
	}
	var nodes []node
	if o.reach == nil {
		nodes = o.nodes
	}
	// A report changes nothing but the status, so it is written only over
	// the object it was decided on: a cache behind this controller's own
	// last write (a rolling update it just reported, say) gets a conflict
	// and reconcile decides again on the live object, instead of undoing
	// that write. What follows a change to the StatefulSets is written
	// whatever the object became since: the change is made.
	rv := ""
	if a.verb == report {
		rv = u.GetResourceVersion()
	}
	if err := c.write(ctx, store, rv, nodes, a.update, stoppedAfter(store, a), phaseOf(o, a), a.status, a.reason, msg); err != nil {
		return err
	}
	c.written(ctx, key, u, o, a, msg)
	return nil
}

// retryError is what a retry returns to the worker, which requeues the
// key with backoff.
func (c *Controller) retryError(key string, o observation) error {
	if r := o.call.result; r != nil && r.err != nil && reason.Of(r.err) == "" {
		// The call panicked (decide): hand the panic to the worker once,
		// whether or not MinIO answers now. Kept, it would be decided on
		// again at every sync, before the update's timeout is looked at:
		// a tenant whose answer panics and then stays silent would hold
		// its record, and its place in flight, for ever.
		c.calls.consume(key)
		return r.err
	}
	if o.reach == nil {
		return o.haltErr
	}
	return o.reach
}

// changeSets gives the StatefulSets spec.image, for setImage and roll, and
// returns the action and message the change leads to: a failed change is
// reported as UpdateFailed, a roll names the StatefulSets it changed.
func (c *Controller) changeSets(ctx context.Context, key string, store *v1.ObjectStore, a action, msg string) (action, string) {
	if a.verb == setImage {
		_, replaced, err := c.setImage(ctx, store)
		if err != nil {
			return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed, update: a.update, outcome: a.outcome, took: a.took}, err.Error()
		}
		if len(replaced) > 0 && a.reason == ReasonUpdatedInPlace {
			// One change, two restarts: the in-place update, then the
			// statefulset controller's own, which the strategy asks for.
			msg = objstatus.Sentences(msg, fmt.Sprintf("StatefulSets %s use the RollingUpdate strategy, so their pods are replaced once more, one at a time, to run the image (PodsCurrent); under OnDelete they would keep running the release they were updated to (docs/restarts.md)", strings.Join(replaced, ", ")))
		}
		return a, msg
	}
	rolled, err := c.rollImage(ctx, store)
	switch {
	case err != nil:
		a.reason, a.outcome, a.after = ReasonUpdateFailed, outcomeFailed, 0
		msg = objstatus.Clauses(msg, "the rolling update failed too: "+err.Error())
	case len(rolled) > 0:
		c.log.Warn().Str("objectstore", key).Str("reason", a.cause).Strs("statefulsets", rolled).Str("image", store.Spec.Image).Str("why", a.message).
			Msg("falling back to a rolling update")
		msg = fmt.Sprintf("rolling update to %s (StatefulSets %s): %s", store.Spec.Image, strings.Join(rolled, ", "), msg)
	default:
		if a.took == 0 {
			a.outcome = "" // nothing rolled, no update ended: not an outcome
		}
		msg = fmt.Sprintf("rolling update to %s: %s", store.Spec.Image, msg)
	}
	return a, msg
}

// written keeps the books once the status an action leads to is written:
// the call result it acted on, the outcome's metric, the fleet's places
// and the failure budget, and when to look again.
func (c *Controller) written(ctx context.Context, key string, u *unstructured.Unstructured, o observation, a action, msg string) {
	if o.call.result != nil {
		c.calls.consume(key)
	}
	if a.outcome != "" {
		c.metrics.observe(a.outcome, a.took)
	}
	if a.reason == ReasonUpdateQueued {
		c.fleet.wait(key)
	} else {
		c.fleet.unwait(key)
	}
	if o.recorded != nil && a.update == nil {
		// Counted before the place in flight is given back: a worker
		// reserving in between sees the update either in flight or
		// failed, never neither (fleet.reserve reads the count afresh).
		c.budget(ctx, key, u, o, a, msg)
	}
	if a.update == nil && (o.recorded != nil || c.fleet.holds(key)) {
		// The update ended (a cache that lags the record sees it end as
		// Current, with nothing recorded).
		c.fleet.end(key)
	}
	if a.verb == setImage && a.reason == ReasonUpdatedInPlace {
		c.log.Info().Str("objectstore", key).Str("release", o.binary.release).Stringer("took", a.took).Msg("every node runs the new release; updated in place")
	}
	if a.after > 0 {
		c.queue.AddAfter(key, a.after)
	}
}

// startCall records the call in the status, conditional on the object
// being what was observed (its resourceVersion), and then makes it beside
// the queue, on one of its unit's call slots. A conflict means the
// object changed since: nothing is called, and the next sync looks again.
func (c *Controller) startCall(ctx context.Context, key string, u *unstructured.Unstructured, store *v1.ObjectStore, o observation, t *tenant, a action, msg string) error {
	if c.calls.state(key).running {
		// The call of an update that ended without its answer (spec.image
		// was removed and put back) is still open, on the unit's call
		// slot: MinIO may still be updating. Nothing starts beside it (a
		// tenant toggling spec.image would stack calls past its slots);
		// its end queues the key. Checked here, on the live object
		// (reconcile read it before a call): a sync on a cache that lags
		// this process's own record never gets this far.
		return c.write(ctx, store, "", o.nodes, o.recorded, store.Status.Stopped, "", metav1.ConditionFalse, ReasonUpdatingInPlace,
			"waiting for MinIO to answer an update call made before spec.image last changed (it ends by the update's timeout at the latest); the update starts then")
	}
	unit := c.unitOf(key)
	if !c.calls.reserve(key, unit) {
		// Queued again when a call of the unit ends.
		return c.write(ctx, store, "", o.nodes, o.recorded, store.Status.Stopped, "Queued", metav1.ConditionFalse, ReasonUpdateQueued,
			fmt.Sprintf("waiting to update to %s: %s has %d update call(s) running, the most it may have at once",
				a.update.Release, unitName(unit), c.cfg.CallsPerNamespace))
	}
	// The fleet's place is taken before the record, and given back when
	// the record is not written: decide saw the count, this holds it
	// against another worker deciding at the same moment.
	first := func() (int, []string) {
		// What the budget says now, not when the sync observed it: a
		// failure counted since frees a place in flight but not a first.
		o := o
		o.halt = c.halts.cached(a.update.Release, o.halt)
		return firstLimit(o, c.params()), o.halt.failedUnits
	}
	ok, share := true, ""
	if o.recorded == nil {
		ok, share = c.fleet.reserve(key, a.update.Release, first)
	}
	if !ok {
		c.calls.release(key)
		// Said as decide would have said it, had it seen this moment.
		o.inFlight = c.fleet.inFlight(key)
		q := gate(o, c.params(), action{verb: call})
		switch {
		case q.reason == ReasonUpdateQueued:
		case share != "":
			q.message = fmt.Sprintf("waiting to update to %s: %s", a.update.Release, share)
		default:
			q.message = fmt.Sprintf("waiting to update to %s: another update started a moment ago", a.update.Release)
		}
		return c.write(ctx, store, "", o.nodes, nil, store.Status.Stopped, "Queued", metav1.ConditionFalse, ReasonUpdateQueued, q.message)
	}
	have := statusOf(store)
	want := have
	// A new update: a stop before it is over.
	want.release, want.update, want.phase, want.stopped = oldest(o.nodes), a.update, phaseOf(o, a), nil
	want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: a.status, Reason: a.reason, Message: msg}, o.now)
	if err := c.apply(ctx, store, have, want, u.GetResourceVersion(), true); err != nil {
		c.calls.release(key)
		if o.recorded == nil {
			c.fleet.end(key)
		}
		if apierrors.IsConflict(err) {
			c.log.Info().Str("objectstore", key).Msg("the ObjectStore changed before the update call was recorded; looking again, nothing called")
		}
		return err
	}
	if o.call.result != nil {
		c.calls.consume(key)
	}
	up := *a.update
	if a.dryRun {
		c.log.Info().Str("objectstore", key).Str("release", up.Release).Str("url", o.updateURL).Str("node", a.host).Int("dryRun", up.DryRuns).
			Msg("asking MinIO for a dry run of the update")
	} else {
		c.log.Info().Str("objectstore", key).Str("release", up.Release).Str("url", o.updateURL).Str("node", a.host).Int("call", up.Calls).
			Msg("updating MinIO in place")
	}
	c.calls.start(ctx, key, func(ctx context.Context) callResult {
		return c.callOnce(ctx, t, o.updateURL, a.host, up.Release, a.dryRun)
	})
	return nil
}

// budget counts the end of a recorded update against its release's
// failure budget (halt.go says what counts), or clears the release's
// failures on a success. The ObjectStore whose failure spends the budget
// gets a Warning Event saying the fleet's updates to the release halted.
func (c *Controller) budget(ctx context.Context, key string, u *unstructured.Unstructured, o observation, a action, msg string) {
	if c.halts == nil {
		return
	}
	release := o.recorded.Release
	log := c.log.With().Str("objectstore", key).Str("release", release).Logger()
	switch {
	case a.verb == setImage && a.reason == ReasonUpdatedInPlace:
		if err := c.halts.succeed(ctx, key, c.unitOf(key), release); err != nil {
			log.Error().Err(err).Str("reason", ReasonUpdatesHalted).Msg("could not clear the release's update failures")
		}
	case countsAgainstRelease(a):
		halted, st, err := c.halts.fail(ctx, key, c.unitOf(key), release, a.cause, a.message)
		if err != nil {
			// The failure goes uncounted; the update itself is reported.
			log.Error().Err(err).Str("reason", ReasonUpdatesHalted).Msg("could not record a failed update in the halt record")
			return
		}
		if halted {
			text := func(failures string) string {
				return fmt.Sprintf("in-place updates to %s failed in %s with none succeeding (%s); no update to it starts anywhere until the halt record %s/%s is deleted",
					release, countUnits(c.cfg.FailureBudget, failedUnitsOf(st.list)...), failures, c.cfg.HaltNamespace, HaltRecordName)
			}
			// The platform's log names every failure; the tenant's Event
			// quotes its own only (describeFailuresFor).
			log.Warn().Str("reason", ReasonUpdatesHalted).Msg(text(describeFailures(st.list)))
			if c.cfg.Recorder != nil {
				c.cfg.Recorder.Event(u, corev1.EventTypeWarning, ReasonUpdatesHalted,
					objstatus.BoundMessage(text(describeFailuresFor(st.list, u.GetNamespace()))))
			}
		}
	}
}

// countsAgainstRelease tells whether the end of a recorded update is a
// failure of its release (halt.go): it ended without the release (rolled,
// failed, its dry run failed, or stopped for the fallback None) because
// MinIO refused or failed it, its dry run included, or its nodes did not
// take it in time.
func countsAgainstRelease(a action) bool {
	switch a.outcome {
	case outcomeRolling, outcomeFailed, outcomeDryRunFailed, outcomeStopped:
		return a.cause == CauseInPlaceRefused || a.cause == CauseNodesNotUpdated || a.cause == CauseDryRunFailed
	}
	return false
}

// stoppedAfter is status.stopped once a is taken: the stop a records, none
// once the nodes run the release or the StatefulSets got the image, else
// what the ObjectStore carries.
func stoppedAfter(store *v1.ObjectStore, a action) *v1.StoppedUpdate {
	switch {
	case a.stopped != nil:
		return a.stopped
	case a.status == metav1.ConditionTrue || a.verb == roll || a.verb == setImage:
		return nil
	}
	return store.Status.Stopped
}

// withRemedy ends msg with the cause's remedy, and with the reason's
// when the reason is one of its own (FallbackDisabled: what would have
// rolled, and what the fallback None asks of the user).
func (c *Controller) withRemedy(msg, cause, reasonName string) string {
	own := ""
	if reasonName == ReasonFallbackDisabled && cause != reasonName {
		own = c.cfg.Reasons.Remedy(reasonName)
	}
	return objstatus.Sentences(msg, c.cfg.Reasons.Remedy(cause), own)
}

// write applies the status when it changed, logging a change of reason;
// conditional on resourceVersion when it is set (a conflict when the
// object changed since).
func (c *Controller) write(ctx context.Context, store *v1.ObjectStore, resourceVersion string, nodes []node, update *v1.UpdateStatus, stopped *v1.StoppedUpdate,
	phase string, st metav1.ConditionStatus, reason, msg string) error {
	have := statusOf(store)
	want := have
	want.seen(nodes)
	want.update, want.stopped, want.phase = update, stopped, phase
	want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: st, Reason: reason, Message: msg}, c.cfg.Clock.Now())
	before := have.cond
	if err := c.apply(ctx, store, have, want, resourceVersion, false); err != nil {
		return err
	}
	if before == nil || before.Reason != reason || before.Status != st {
		ev := c.log.Info()
		if st != metav1.ConditionTrue && reason != ReasonUpdatingInPlace && reason != ReasonWaitingForBinary && reason != ReasonUpdateQueued &&
			reason != ReasonOutsideWindow {
			ev = c.log.Warn()
		}
		ev.Str("objectstore", store.Namespace+"/"+store.Name).Str("reason", reason).Str("status", string(st)).Str("release", want.release).Msg(msg)
	}
	return nil
}
