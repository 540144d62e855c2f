package updates

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// Stopping. Two things end an update without the release and without a
// rolling update: a dry run the nodes did not pass (dryrun.go), and any
// failure of a tenant whose fallback is None (spec.updates.fallback, or
// Config.Fallback). A stopped update is recorded in status.stopped, so
// that the next look, which sees no update recorded and nodes still
// behind, does not start the same update again at once (and count it
// again, and again): nothing starts for the same image before the
// record's retryAt, unless the spec changes (a new image, a fallback set
// to Rolling). A stop decided before any call (mixed platforms, a
// downgrade, a tenant that does not trust the upgrade server) needs no
// record: nothing was called, and every look decides it again alike.

// phaseStopped is status.updatePhase of an update stopped for its
// fallback.
const phaseStopped = "Stopped"

// stoppedRetry is how long a stopped update waits before it is tried
// again: a tenant fixed by hand (its key, MINIO_UPDATE) proceeds without
// anyone touching the ObjectStore, and one that is not costs a dry run
// or a refused call an hour, counted once per unit.
const stoppedRetry = time.Hour

// noFallback is rollBack for a tenant whose fallback is None: the update
// stops, saying what would have rolled it and its remedy (the cause's);
// no StatefulSet changes.
func noFallback(o observation, p params, why error) action {
	msg := why.Error() + "; the StatefulSets are not rolled: the fallback is None (spec.updates.fallback, or the operator's default)"
	if o.recorded == nil {
		// Decided before any call: decided again on every look.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonFallbackDisabled, cause: reason.Of(why), message: msg, after: 5 * p.poll}
	}
	return stopWith(o, ReasonFallbackDisabled, why, msg, stoppedRetry)
}

// stop ends the recorded update as name (ReasonDryRunFailed,
// ReasonFallbackDisabled) for why, to be tried again after retry.
func stop(o observation, name string, why error, retry time.Duration) action {
	return stopWith(o, name, why, why.Error(), retry)
}

func stopWith(o observation, name string, why error, msg string, retry time.Duration) action {
	up := o.recorded
	at := metav1.NewTime(o.now.Add(retry))
	outcome := outcomeStopped
	if name == ReasonDryRunFailed {
		outcome = outcomeDryRunFailed
	}
	return action{verb: report, status: metav1.ConditionFalse, reason: name, cause: reason.Of(why), outcome: outcome, took: o.now.Sub(up.Started.Time), after: retry,
		stopped: &v1.StoppedUpdate{Release: up.Release, Image: o.image, Generation: o.generation, Reason: name, At: metav1.NewTime(o.now), RetryAt: at},
		message: fmt.Sprintf("%s; the operator tries again at %s, or at once when the spec changes", msg, at.UTC().Format(time.RFC3339))}
}

// held holds back a new update while the last one to the same image
// stopped and its retry has not come (nor the spec changed): the
// condition stays as the stop wrote it.
func held(o observation) (action, bool) {
	s := o.stopped
	if s == nil || s.Image != o.image || s.Generation != o.generation || !o.now.Before(s.RetryAt.Time) {
		return action{}, false
	}
	msg := fmt.Sprintf("the update to %s stopped at %s; the operator tries again at %s, or at once when the spec changes",
		s.Release, s.At.UTC().Format(time.RFC3339), s.RetryAt.UTC().Format(time.RFC3339))
	if o.prev != nil && o.prev.Reason == s.Reason {
		msg = o.prev.Message // with its remedy
	}
	return action{verb: report, status: metav1.ConditionFalse, reason: s.Reason, message: msg, after: s.RetryAt.Sub(o.now)}, true
}
