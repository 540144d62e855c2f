package updates

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// maxCalls is how many update calls one release gets. MinIO can damage the
// binary it pushes to some nodes right after a start ("Updated file has
// wrong checksum", "magic number mismatch": its download buffer goes back
// to a pool while still in use); a node that failed that way is asked
// again, and nodes left behind by an update are called directly.
const maxCalls = 3

// settle is how long nodes get after a call to restart on the new release
// before the ones left behind are called again.
const settle = 10 * time.Second

// clockSkew is how far ahead of this process's clock a recorded update
// may have started: the replica that recorded it (a previous leader) may
// run a clock a little ahead.
const clockSkew = time.Minute

// follow sees a recorded update through: done when every node reports
// it, called once more for nodes left behind, rolled back past the
// timeout. It never calls while a call may still be running.
func follow(o observation, p params) action {
	up := o.recorded
	elapsed := o.now.Sub(up.Started.Time)
	keep := func(msg string) action {
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, update: up, message: msg, after: p.poll}
	}
	if o.call.running {
		// MinIO answers when every node has the binary; the call's own
		// deadline is the update's timeout.
		return keep(fmt.Sprintf("asked MinIO to update to %s (call %d); waiting for its answer", up.Release, up.Calls))
	}
	if up.Started.After(o.now.Add(clockSkew)) {
		// Not a record the operator wrote: it stamps the start from its
		// own clock. Followed, it would never time out.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll,
			message: fmt.Sprintf("status.update says the update to %s started at %s, ahead of the operator's clock (%s): not a record the operator wrote; it is ended, nothing is counted against the release, and the update starts afresh",
				up.Release, up.Started.UTC().Format(time.RFC3339), o.now.UTC().Format(time.RFC3339))}
	}
	if up.Image != "" && up.Image != o.image {
		// spec.image changed under the update: start over.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll,
			message: fmt.Sprintf("the image changed while updating to %s; starting over", up.Release)}
	}
	if up.Calls == 0 {
		// No real call yet: the dry run is under way (dryrun.go).
		return verify(o, p)
	}
	if r := o.call.result; r != nil {
		switch {
		case r.err != nil && reason.Of(r.err) == "":
			// Not MinIO's answer: a panic while reading it (act returns it
			// to the worker, which reports InternalError).
			return action{verb: retry}
		case reason.Of(r.err) == CauseDownloadRefused:
			return retryLater(o, p, r.err.Error())
		case r.err == nil && len(r.failed) > 0 && r.updated == 0 && len(r.failed) == r.refused:
			return retryLater(o, p, fmt.Sprintf("MinIO could not fetch %s from the operator's upgrade server: %s", up.Release, strings.Join(r.failed, "; ")))
		case r.err != nil:
			return rollBack(o, p, r.err)
		case len(r.failed) > 0 && len(r.failed) == r.transient && callsLeft(up):
			// MinIO garbled the binary on its way to these nodes (see
			// maxCalls): ask one of them again, which downloads it afresh.
			return callAction(o, up, failedHost(r.failed[0]), false)
		case len(r.failed) > 0 && r.updated == 0:
			return rollBack(o, p, reason.Errorf(CauseInPlaceRefused, "MinIO could not update in place to %s: %s", up.Release, strings.Join(r.failed, "; ")))
		}
	}
	if o.reach == nil && allOn(o.nodes, up.Release) {
		return updated(o)
	}
	if a, ok := afterRefusal(o, p, false); ok {
		return a
	}
	if elapsed > p.timeout {
		behind := "nodes still on another release: " + strings.Join(behindOf(o.nodes, up.Release), ", ")
		if o.reach != nil {
			behind = "the admin API did not answer: " + o.reach.Error()
		}
		return rollBack(o, p, reason.Errorf(CauseNodesNotUpdated, "the in-place update to %s did not complete in %s (%s)", up.Release, p.timeout, behind))
	}
	behind := behindOf(o.nodes, up.Release)
	if o.reach == nil && o.now.Sub(up.LastCall.Time) > settle && callsLeft(up) &&
		len(behind) > 0 && len(behind) < len(o.nodes) && allOnline(o.nodes) {
		// Mixed releases: ask a node left behind, which pushes the binary
		// to the other nodes left behind.
		if o.urlErr != nil {
			return rollBack(o, p, reason.Wrap(CauseBinaryUnavailable, o.urlErr))
		}
		return callAction(o, up, behind[0], false)
	}
	return keep(fmt.Sprintf("updating to %s in place (%d call(s) made; nodes not on it yet: %s)", up.Release, up.Calls, strings.Join(behind, ", ")))
}

// updated: every node runs the recorded release; the StatefulSets follow.
func updated(o observation) action {
	up := o.recorded
	elapsed := o.now.Sub(up.Started.Time)
	return action{verb: setImage, status: metav1.ConditionTrue, reason: ReasonUpdatedInPlace, outcome: outcomeInPlace, took: elapsed,
		message: fmt.Sprintf("every node runs %s, the release of %s, updated in place in %s", up.Release, o.image, elapsed.Round(time.Second))}
}

// callsLeft tells whether the update may call MinIO again for nodes
// left behind or a damaged download: maxCalls of its own, not counting
// the calls whose download the operator's own server refused (those are
// not the tenant's, and retried apart: retryLater).
func callsLeft(up *v1.UpdateStatus) bool { return up.Calls-up.Refusals < maxCalls }

// retryLater answers a call whose download the operator's own upgrade
// server refused or dropped: not the tenant's failure, so it is called
// again after a pause that doubles each time, and no outcome is counted
// against the release (the failure budget never sees it). All of it stays
// within the update's timeout, as any update does: a tenant that words
// its own failure as our refusal holds its place in flight no longer than
// one that never answers, and is then rolled (not counted either).
func retryLater(o observation, p params, why string) action {
	next := *o.recorded
	next.Refusals++
	pause := refusedPause(p) << min(next.Refusals-1, 5)
	at := metav1.NewTime(o.now.Add(pause))
	if end := next.Started.Add(p.timeout); at.After(end) {
		at = metav1.NewTime(end)
	}
	next.RetryAt = &at
	return action{verb: report, status: metav1.ConditionFalse, reason: CauseDownloadRefused, cause: CauseDownloadRefused, update: &next,
		message: fmt.Sprintf("%s; the operator's own server refused or dropped the download, which is not the tenant's failure: MinIO is asked again at %s (refusal %d), and nothing is counted against %s",
			why, at.UTC().Format(time.RFC3339), next.Refusals, next.Release), after: at.Sub(o.now) + time.Millisecond}
}

// refusedPause is how long a first refused download waits before the
// call is made again: long enough for the server's downloads to move on.
func refusedPause(p params) time.Duration { return 5 * p.poll }

// behindOf lists the nodes not on release.
func behindOf(nodes []node, release string) []string {
	var out []string
	for _, n := range nodes {
		if !n.online || !sameRelease(n.release, release) {
			out = append(out, n.endpoint)
		}
	}
	return out
}
