package updates

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// The dry run. Before the real call an update asks MinIO for a dry run
// of the same URL (ServerUpdateV2 with dry-run=true): every node
// downloads the binary and checks its checksum and signature; nothing is
// replaced and nothing restarts. The real call follows only a dry run
// every node passed. So a release no node accepts (a signature the
// tenants' MINIO_UPDATE_MINISIGN_PUBKEY refuses, a damaged binary) is
// found without restarting anyone: the failure counts against the
// release's budget like a failed update, and is never rolled (the roll
// would restart every pod onto a release the tenant's own MinIO refused).
//
// The dry run is recorded in status.update (DryRuns, Calls still 0)
// before it is made, as a call is, and its answer is acted on by a sync
// like a call's: a new leader that finds a dry run recorded and no
// answer makes it again (it restarts nothing).
//
// What a dry run's answer leads to, by the same reading of MinIO's words
// as a call's (callOnce, refused.go):
//   - every node passed: the real call, through the same host;
//   - our own server refused the download: retried later, never counted
//     (retryLater), and past the update's timeout the fallback, as for a
//     call;
//   - MethodNotAllowed (MINIO_UPDATE=off, a release time MinIO does not
//     know): no verdict on the binary, but MinIO's refusal of in-place
//     updates, which the real call would answer alike: the fallback
//     follows as it would for the call (InPlaceRefused, counted);
//   - only damaged copies ("wrong checksum", "magic number mismatch" on
//     some nodes, MinIO's bug right after a start): the dry run is made
//     again through a damaged node, up to maxCalls; past them the update
//     stops as MinIO's hiccup (BinaryDamagedByMinIO), not counted, and is
//     tried again after the update's timeout;
//   - any other failure of a node, or of the dry run itself: the update
//     stops, DryRunFailed, counted against the release, not rolled;
//   - no answer: the dry run is made again once the nodes had time to
//     settle, up to maxCalls; past the update's timeout the fallback
//     follows, not counted (the tenant did not answer: nothing was said
//     about the release, and a tenant that never answers holds its place
//     in flight no longer than the timeout, as with a call).
//
// Only a verdict on the binary (a node refusing it, MinIO refusing the
// dry run of it) is never rolled: the roll would restart every pod onto a
// release the tenant's own MinIO refused.

// phaseVerifying is status.updatePhase while the dry run is under way.
const phaseVerifying = "Verifying"

// verify follows an update whose dry run is recorded and no real call
// made yet.
func verify(o observation, p params) action {
	up := o.recorded
	if o.reach == nil && allOn(o.nodes, up.Release) {
		// Updated by other means meanwhile (by hand): done, whatever
		// the dry run answered.
		return updated(o)
	}
	if r := o.call.result; r != nil && !r.lost {
		return dryRunAnswered(o, p, r)
	}
	elapsed := o.now.Sub(up.Started.Time)
	if a, ok := afterRefusal(o, p, true); ok {
		return a
	}
	if elapsed > p.timeout {
		// No verdict on the release either: the fallback, as for a call
		// that got no answer, but not counted.
		return rollBack(o, p, reason.Errorf(CauseTenantUnreachable, "MinIO did not answer the dry run of %s within %s (%d dry run(s)); nothing is counted against the release",
			up.Release, p.timeout, up.DryRuns))
	}
	if o.reach == nil && !o.call.running && o.now.Sub(up.LastCall.Time) > settle && dryRunsLeft(up) {
		// The answer was lost (a new leader, a broken connection, or
		// MinIO busy with an earlier call of ours): a dry run restarts
		// nothing, so it is made again.
		if o.urlErr != nil {
			return stop(o, ReasonDryRunFailed, reason.Wrap(CauseBinaryUnavailable, o.urlErr), p.timeout)
		}
		return callAction(o, up, callHost(o, up.Release), true)
	}
	return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, update: up, after: p.poll, phase: phaseVerifying,
		message: fmt.Sprintf("waiting for MinIO's dry run of %s (dry run %d): every node fetches and verifies the binary, nothing restarts", up.Release, up.DryRuns)}
}

// dryRunAnswered decides on MinIO's answer to a dry run.
func dryRunAnswered(o observation, p params, r *callResult) action {
	up := o.recorded
	switch {
	case r.err != nil && reason.Of(r.err) == "":
		// Not MinIO's answer: a panic while reading it.
		return action{verb: retry}
	case reason.Of(r.err) == CauseDownloadRefused:
		return retryLater(o, p, r.err.Error())
	case r.err == nil && len(r.failed) > 0 && r.updated == 0 && len(r.failed) == r.refused:
		return retryLater(o, p, fmt.Sprintf("MinIO could not fetch %s from the operator's upgrade server in the dry run: %s", up.Release, strings.Join(r.failed, "; ")))
	case reason.Of(r.err) == CauseInPlaceRefused:
		// MinIO refuses in-place updates as such: the call would too.
		return rollBack(o, p, r.err)
	case r.err != nil:
		return stop(o, ReasonDryRunFailed, r.err, stoppedRetry)
	case len(r.failed) == 0 && len(o.sets.replacing) > 0:
		// Every node passed, but the pods are being replaced since (a
		// certificate restart): the real call now would meet them going
		// down. The update ends, not counted, and starts again, dry run
		// first, once the rollout is over (gate: WaitingForPods).
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForPods, after: 5 * p.poll,
			message: fmt.Sprintf("the dry run of %s passed, but the pods of StatefulSets %s are being replaced since (PodsCurrent); the update starts again once they all run their current template",
				up.Release, strings.Join(o.sets.replacing, ", "))}
	case len(r.failed) == 0:
		// Every node fetched and verified the binary: the real call, a
		// fresh count of our own refusals for it.
		next := *up
		next.Refusals, next.RetryAt = 0, nil
		return callAction(o, &next, callHost(o, up.Release), false)
	case len(r.failed) == r.transient && dryRunsLeft(up):
		// MinIO garbled the binary on its way to these nodes: ask one of
		// them again, which downloads it afresh.
		return callAction(o, up, failedHost(r.failed[0]), true)
	case len(r.failed) == r.transient:
		return stop(o, ReasonDryRunFailed, reason.Errorf(CauseBinaryDamagedByMinIO, "MinIO damaged the binary of %s on its way to some nodes in each of %d dry runs (%s); its hiccup, not the release's: nothing was restarted and nothing is counted against the release",
			up.Release, up.DryRuns, strings.Join(r.failed, "; ")), p.timeout)
	}
	return stop(o, ReasonDryRunFailed, reason.Errorf(CauseDryRunFailed, "MinIO's dry run of %s failed on %d of %d nodes, so no node was updated and none restarted: %s",
		up.Release, len(r.failed), len(r.failed)+r.updated, strings.Join(r.failed, "; ")), stoppedRetry)
}

// dryRunsLeft tells whether the update may make another dry run:
// maxCalls of its own, not counting those whose download the operator's
// own server refused (retryLater; no real call has been made, so every
// refusal so far was a dry run's).
func dryRunsLeft(up *v1.UpdateStatus) bool { return up.DryRuns-up.Refusals < maxCalls }

// callHost is the node a call goes through: one left behind when some
// nodes run the release already (such a node answers "latest version"
// for every node), else the tenant's endpoint.
func callHost(o observation, release string) string {
	behind := behindOf(o.nodes, release)
	if len(behind) > 0 && len(behind) < len(o.nodes) {
		return behind[0]
	}
	return ""
}

// afterRefusal follows an update whose last call (a dry run when dryRun)
// our own server refused or dropped MinIO's download for: the call again
// once up.RetryAt comes, within the update's timeout; nothing is counted
// against the release. ok is false when no such call is due.
func afterRefusal(o observation, p params, dryRun bool) (a action, ok bool) {
	up := o.recorded
	if up.RetryAt == nil || up.LastCall.After(up.RetryAt.Time) {
		return action{}, false
	}
	inDryRun, timedOut := "", "; the StatefulSets are rolled instead, and this is not counted against the release"
	if dryRun {
		inDryRun, timedOut = " in the dry run", ", in the dry run; this is not counted against the release"
	}
	switch {
	case o.now.Sub(up.Started.Time) > p.timeout:
		// No verdict on the release: the fallback, as for a call that got
		// no answer.
		return rollBack(o, p, reason.Errorf(CauseDownloadRefused, "the operator's own server refused or dropped MinIO's download of %s %d time(s) within %s%s",
			up.Release, up.Refusals, p.timeout, timedOut)), true
	case o.now.Before(up.RetryAt.Time):
		return action{verb: report, status: metav1.ConditionFalse, reason: CauseDownloadRefused, cause: CauseDownloadRefused, update: up, after: up.RetryAt.Sub(o.now),
			message: fmt.Sprintf("the operator's own server refused or dropped MinIO's download of %s%s (%d time(s)), which is not the tenant's failure: MinIO is asked again at %s; nothing is counted against the release",
				up.Release, inDryRun, up.Refusals, up.RetryAt.UTC().Format(time.RFC3339))}, true
	case o.urlErr != nil && dryRun:
		return stop(o, ReasonDryRunFailed, reason.Wrap(CauseBinaryUnavailable, o.urlErr), p.timeout), true
	case o.urlErr != nil:
		return rollBack(o, p, reason.Wrap(CauseBinaryUnavailable, o.urlErr)), true
	case dryRun:
		return callAction(o, up, callHost(o, up.Release), true), true
	}
	return callAction(o, up, "", false), true
}
