package updates

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/window"
)

// observation is everything one sync saw of an ObjectStore, read before
// anything is decided: the spec, what the status records, what the store
// resolved its image to, what MinIO's admin API reports and what the
// StatefulSets run. decide reads nothing else.
type observation struct {
	now       time.Time
	namespace string
	// unit is what the ObjectStore counts against in the fleet's shares
	// and the failure budget (units.go; "": its namespace).
	unit   string
	image  string
	paused bool
	// generation is the ObjectStore's metadata.generation.
	generation int64
	// fallback is what follows an update that cannot be made or failed:
	// v1.FallbackRolling or v1.FallbackNone (spec.updates.fallback, else
	// Config.Fallback).
	fallback string
	// stopped is status.stopped: the last update to stop without the
	// release and without a roll, and when it may start again.
	stopped *v1.StoppedUpdate
	// recorded is status.update: a call recorded and not yet seen through.
	recorded *v1.UpdateStatus
	// prev is the VersionCurrent condition the object carries.
	prev   *metav1.Condition
	binary binaryState
	// reach says why the nodes are unknown (a typed cause, or an untyped
	// API error to retry); nil when nodes holds the admin API's answer.
	reach error
	nodes []node
	sets  setsState
	// call is this process's call for the recorded update.
	call callState
	// updateURL is the .sha256sum URL MinIO would be given; urlErr says why
	// there is none, trustErr why the tenant would not trust it.
	updateURL        string
	urlErr, trustErr error
	// platforms are those ("os/arch") of the Nodes the tenant's pods run
	// on (placement.Platforms); more than one is never updated in place.
	platforms []string

	// Fleet controls, each holding an update back before it starts.
	// window is spec.updates.window (nil: none), held to by updateGate.
	window *window.Spec
	// inFlight are the other ObjectStores with an in-place update in
	// flight, fleet-wide (fleet.inFlight).
	inFlight []flight
	// halt is the failure budget's state for the release to start, haltErr
	// why it could not be read; resumed: the ObjectStore's
	// ResumeUpdatesAnnotation names that release.
	halt    haltState
	haltErr error
	resumed string
}

// binaryState is what the binary source resolved spec.image to.
type binaryState struct {
	resolved, available bool
	release, reason     string
}

// setsState is what the ObjectStore's StatefulSets run.
type setsState struct {
	count int
	// onImage: there is at least one, and every one runs spec.image.
	onImage bool
	// replacing are those whose pods the rollout is replacing now: held
	// (v1.RolloutOf), and PodsCurrent not saying that it waits
	// (v1.RolloutIdle).
	replacing []string
}

// callState is an update call made by this process.
type callState struct {
	running bool
	// result is the answer to the last call, until a sync acts on it.
	result *callResult
}

// callResult sorts MinIO's answer to one ServerUpdateV2 call.
type callResult struct {
	// err: the call failed as a whole (a typed cause).
	err error
	// failed are "node <host>: <MinIO's error>", transient how many of
	// them are a damaged download, refused how many could not fetch from
	// the upgrade server, updated how many nodes took the binary.
	failed    []string
	transient int
	refused   int
	updated   int
	// lost: MinIO's answer never came (the connection broke, or another
	// call of ours was being answered); the nodes say what happened.
	lost bool
}

// verb is what act does.
type verb int

const (
	// report writes the condition and status.update.
	report verb = iota
	// retry writes nothing and returns observation.reach: a transient API
	// error, retried with the queue's backoff.
	retry
	// call records the call in status.update, then asks MinIO through host.
	call
	// setImage gives the StatefulSets spec.image, then reports.
	setImage
	// roll is setImage for a rolling update: a store without StatefulSets
	// cannot be rolled.
	roll
)

func (v verb) String() string {
	return [...]string{"report", "retry", "call", "setImage", "roll"}[v]
}

// action is decide's answer: one verb and the status it leads to.
type action struct {
	verb    verb
	status  metav1.ConditionStatus
	reason  string
	message string
	// cause is the typed cause of a condition that is not True, for the
	// remedy (Config.Remedy).
	cause string
	// update is status.update after the action (nil: none).
	update *v1.UpdateStatus
	// host is the node a call goes through ("": the tenant's endpoint).
	host string
	// after requeues the key (0: no requeue).
	after time.Duration
	// outcome, when set, is counted once the action is taken, with took.
	outcome string
	took    time.Duration
	// phase, when set, is status.updatePhase (else phaseOf says).
	phase string
	// dryRun: the call is MinIO's dry run (every node fetches and
	// verifies the binary; nothing restarts), not the update itself.
	dryRun bool
	// stopped, when set, is the stop status.stopped records (stop.go).
	stopped *v1.StoppedUpdate
}

// params are decide's settings.
type params struct {
	// timeout bounds an update, from its first call until every node
	// reports the release; past it the tenant is rolled.
	timeout time.Duration
	// poll is how often an update in flight is looked at.
	poll time.Duration
	// maxPoll bounds the wait between looks at a tenant whose admin API
	// does not answer yet.
	maxPoll time.Duration
	// maxInFlight caps in-place updates in flight fleet-wide (0: no cap).
	maxInFlight int
	// budget is the failure budget (0: none): how many units' updates to
	// a release may fail before it halts, and so how many units may
	// update to a release at once until one succeeded.
	budget int
}

// decide is the update controller's one consequential choice, a pure
// function of what a sync observed: leave the tenant be, ask MinIO to
// update in place, follow an update in flight, or roll the StatefulSets,
// and what VersionCurrent then says. It never calls twice for one recorded
// call: a call is made only with no update recorded, or for a recorded
// one whose last call has settled, with fewer than maxCalls made, and
// never while this process's call is still running.
func decide(o observation, p params) action {
	if o.recorded != nil {
		return follow(o, p)
	}
	a := begin(o, p)
	if a.verb == call || a.verb == roll {
		return gate(o, p, a)
	}
	return a
}

// begin decides for a tenant with no update recorded.
func begin(o observation, p params) action {
	if o.reach != nil && reason.Of(o.reach) == "" {
		return action{verb: retry}
	}
	b := o.binary
	if b.resolved && b.available && o.reach == nil && allOn(o.nodes, b.release) {
		return current(o)
	}
	if o.paused {
		paused := updateGate().Paused()
		return action{verb: report, status: metav1.ConditionFalse, reason: paused.Reason, message: paused.Message}
	}
	if !b.resolved {
		// The binary source is still resolving the image; it calls
		// Resolved when done.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForBinary,
			message: fmt.Sprintf("waiting for the release of %s to be resolved into the upgrade store", o.image)}
	}
	if reason.Of(o.reach) == CauseTenantUnreachable && (o.sets.onImage || o.sets.count == 0 || unreachableFor(o) <= p.timeout) {
		// Not a verdict: the pods are starting (an ObjectStore is usually
		// applied before its MinIO answers), or restarting. Look again,
		// less often the longer it lasts; roll to a new image only once it
		// has not answered for the update's timeout.
		msg := o.reach.Error()
		if !o.sets.onImage && o.sets.count > 0 {
			msg += fmt.Sprintf("; the StatefulSets are rolled to %s if it does not answer within %s", o.image, p.timeout)
		}
		return action{verb: report, status: metav1.ConditionUnknown, reason: ReasonTenantUnreachable,
			message: msg, cause: CauseTenantUnreachable, after: unreachableBackoff(o, p)}
	}
	switch {
	case o.sets.onImage && o.reach != nil:
		// Missing configuration: wait for a spec change, a change to the
		// configuration Secret (watched) or the resync.
		return action{verb: report, status: metav1.ConditionUnknown, reason: reason.Of(o.reach), message: o.reach.Error(), cause: reason.Of(o.reach)}
	case o.sets.onImage:
		// The StatefulSets already run spec.image: a rolling update to it
		// is under way (or pods pick it up as they restart). An in-place
		// call now would race the restarts, or repeat one that failed.
		if o.prev != nil && o.prev.Reason == ReasonRollingUpdate && o.prev.Status != metav1.ConditionTrue {
			return action{verb: report, status: o.prev.Status, reason: o.prev.Reason, message: o.prev.Message, after: 5 * p.poll}
		}
		want := b.release
		if !b.available {
			want = "its release (not in the upgrade store: " + b.reason + ")"
		}
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForNodes, after: p.poll,
			message: fmt.Sprintf("the StatefulSets run %s; waiting for every node to report %s (%s)", o.image, want, describeNodes(o.nodes))}
	case !b.available:
		// Not a failure of the in-place path: the image itself could not be
		// pulled or verified. Rolling pods onto it would trade a verified
		// binary for one the operator refused, or pods stuck pulling; wait
		// for BinaryAvailable instead.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed, cause: CauseBinaryUnavailable,
			message: fmt.Sprintf("the release of %s is not in the upgrade store (BinaryAvailable: %s); nothing is updated or rolled until it is", o.image, b.reason)}
	case o.reach != nil:
		return rollBack(o, p, o.reach)
	}
	if a, ok := held(o); ok {
		return a
	}
	return start(o, p)
}

// gate holds back an update about to start (a first call, or a rolling
// update instead of one): outside the tenant's window, while the fleet's
// updates to the release are halted, or, for a call, while the fleet has
// its most in-place updates in flight. An update already recorded is
// never held: it finishes whatever the window or the budget say.
func gate(o observation, p params, a action) action {
	release := o.binary.release
	hold := func(reason, msg string, after time.Duration) action {
		return action{verb: report, status: metav1.ConditionFalse, reason: reason, message: msg, after: after}
	}
	// The pause was the gate's answer in begin, before anything else.
	if c := updateGate().Check(false, o.window, o.now); c != nil {
		if c.Reason != window.ReasonOutside {
			return action{verb: report, status: metav1.ConditionFalse, reason: c.Reason, cause: c.Reason, message: c.Message}
		}
		h := hold(c.Reason, fmt.Sprintf("waiting to update to %s: %s", release, c.Message), c.After)
		h.phase = "Window " + windowPhase(o.now, c.Next)
		return h
	}
	if o.haltErr != nil {
		return action{verb: retry}
	}
	if o.halt.halted && o.resumed != release {
		return hold(ReasonUpdatesHalted, fmt.Sprintf("updates to %s are halted fleet-wide since %s: in-place updates to it failed in %s (%s); "+
			"the platform resumes them by deleting the halt record, or this ObjectStore alone by the annotation %s: %q",
			release, o.halt.since.UTC().Format(time.RFC3339), countUnits(len(o.halt.list), failedUnitsOf(o.halt.list)...),
			describeFailuresFor(o.halt.list, o.namespace), v1.ResumeUpdatesAnnotation, release), haltRecheck)
	}
	if a.verb == call && len(o.sets.replacing) > 0 {
		// One disruption at a time: a pod the rollout replaces during the
		// update would come back on the image's binary, which MinIO does
		// not run beside the release its peers were updated to. A rollout
		// that waits (for MinIO's consent, say) has no pod down: the
		// update goes, and the rollout waits for it. (A rolling update
		// supersedes the rollout: it is not held.)
		return hold(ReasonWaitingForPods, fmt.Sprintf("waiting to update to %s: the pods of StatefulSets %s are being replaced (PodsCurrent); the update starts once they all run their current template",
			release, strings.Join(o.sets.replacing, ", ")), 5*p.poll)
	}
	if a.verb == call && p.maxInFlight > 0 && len(o.inFlight) >= p.maxInFlight {
		return hold(ReasonUpdateQueued, fmt.Sprintf("waiting to update to %s: %d in-place updates are in flight across the fleet (%s), the most the operator runs at once; it starts when one ends",
			release, len(o.inFlight), ownAndOthers(keysOf(o.inFlight), o.namespace)), 5*p.poll)
	}
	if first := firstLimit(o, p); a.verb == call && first >= 0 {
		if units := firstUnits(o.inFlight, o.unitOrNamespace(), release, o.halt.failedUnits); len(units) >= first {
			noun := unitNoun(o.unitOrNamespace())
			return hold(ReasonUpdateQueued, fmt.Sprintf("waiting to update to %s: no update to it has succeeded yet; %d other %s have one in flight and %d failed, "+
				"and no more than the failure budget (%d %s) update to a release at once until one succeeds",
				release, len(units), noun, o.halt.failed, p.budget, noun), 5*p.poll)
		}
	}
	return a
}

// firstLimit is how many other units may have an update to the release
// in flight for this one to start: with a failure budget, until an
// update to the release succeeded, the units updating to it and those
// that failed it stay within the budget, so a release that fails
// everywhere reaches no more tenants than the budget. -1: no limit.
func firstLimit(o observation, p params) int {
	if p.budget <= 0 || o.halt.proven || (o.resumed != "" && o.resumed == o.binary.release) {
		// A tenant that resumed the release takes the risk on itself.
		return -1
	}
	failed := o.halt.failed
	if slices.Contains(o.halt.failedUnits, o.unitOrNamespace()) {
		// Its own unit tries again: no unit more at risk.
		failed--
	}
	return max(p.budget-failed, 0)
}

// unitOrNamespace is the unit o counts against.
func (o observation) unitOrNamespace() string {
	if o.unit != "" {
		return o.unit
	}
	return o.namespace
}

// haltRecheck is how often a tenant held by a halt looks again: the record
// is read at most every haltRefresh, and a deleted one resumes.
const haltRecheck = 30 * time.Second

// windowPhase words the next opening for the Update column: the time of
// day when it is within a day, else the date too.
func windowPhase(now, next time.Time) string {
	next = next.UTC()
	if next.Sub(now) < 24*time.Hour {
		return next.Format("15:04Z")
	}
	return next.Format("Jan 2 15:04Z")
}

// ownAndOthers says who holds the fleet's places as a tenant of
// namespace may read it: its own namespace's ObjectStores by name, the
// others only counted (no tenant reads another's names).
func ownAndOthers(keys []string, namespace string) string {
	var own []string
	others := 0
	for _, k := range keys {
		if ns, _, _ := strings.Cut(k, "/"); ns == namespace {
			own = append(own, k)
		} else {
			others++
		}
	}
	switch {
	case len(own) == 0:
		return fmt.Sprintf("%d in other namespaces", others)
	case others == 0:
		return strings.Join(firstN(own, 8), ", ")
	}
	return fmt.Sprintf("%s, and %d in other namespaces", strings.Join(firstN(own, 8), ", "), others)
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}

// phaseOf is status.updatePhase for an action: a word or two for the
// Update column of kubectl get objectstore.
func phaseOf(o observation, a action) string {
	if a.phase != "" {
		return a.phase
	}
	switch {
	case a.status == metav1.ConditionTrue:
		return "Current"
	case a.reason == ReasonUpdatingInPlace:
		release := o.binary.release
		if a.update != nil {
			release = a.update.Release
		} else if o.recorded != nil {
			release = o.recorded.Release
		}
		on := 0
		for _, n := range o.nodes {
			if n.online && sameRelease(n.release, release) {
				on++
			}
		}
		return fmt.Sprintf("Updating %d/%d", on, len(o.nodes))
	case a.reason == ReasonUpdateQueued:
		return "Queued"
	case a.reason == ReasonUpdatesHalted:
		return "Halted"
	case a.reason == ReasonRollingUpdate:
		return "Rolling"
	case a.reason == ReasonFallbackDisabled:
		return phaseStopped
	case a.reason == ReasonUpdatesPaused:
		return "Paused"
	case a.reason == ReasonWaitingForNodes, a.reason == ReasonWaitingForBinary:
		return "Waiting"
	case a.reason == ReasonTenantUnreachable:
		return "Unreachable"
	}
	return "Failed"
}

// updateGate holds the start of an update to the tenant's pause
// annotation and its window, as the window's Gate answers for every kind
// of work (certificate restarts keep the same window).
func updateGate() window.Gate {
	return window.Gate{Work: "updates", Field: "spec.updates.window",
		PauseAnnotation: v1.UpdatesPausedAnnotation, PauseReason: ReasonUpdatesPaused}
}

// unreachableBackoff is the wait before looking again at a tenant whose
// admin API does not answer: a quarter of how long it has not answered,
// from 1 s up to maxPoll. A tenant that starts answering is seen within a
// quarter of its outage; one that never does costs a call per maxPoll.
func unreachableBackoff(o observation, p params) time.Duration {
	return min(max(unreachableFor(o)/4, time.Second), max(p.maxPoll, time.Second))
}

// unreachableFor is how long the condition has said TenantUnreachable.
func unreachableFor(o observation) time.Duration {
	if o.prev != nil && o.prev.Reason == ReasonTenantUnreachable && o.prev.Status == metav1.ConditionUnknown {
		return o.now.Sub(o.prev.LastTransitionTime.Time)
	}
	return 0
}

// current: every node runs the wanted release (as MinIO orders releases).
// The StatefulSets follow, so pods that restart later keep it.
func current(o observation) action {
	release := o.binary.release
	msg := fmt.Sprintf("every node runs %s, the release of %s", release, o.image)
	if running := oldest(o.nodes); running != release {
		// A hotfix tag: MinIO reports the release time alone, and will not
		// update in place between two builds of one time.
		msg = fmt.Sprintf("every node runs a build of %s, which MinIO orders with %s, the release of %s; MinIO cannot tell them apart nor update in place between them, so pods take the image's build as they restart",
			running, release, o.image)
	}
	if o.paused {
		// Not even the image is set: that restarts pods under a
		// RollingUpdate strategy.
		return action{verb: report, status: metav1.ConditionTrue, reason: ReasonUpdatesPaused,
			message: msg + "; updates are paused by the annotation " + v1.UpdatesPausedAnnotation}
	}
	reason := ReasonCurrent
	if o.prev != nil && (o.prev.Reason == ReasonUpdatedInPlace || o.prev.Reason == ReasonRollingUpdate) {
		reason = o.prev.Reason
	}
	return action{verb: setImage, status: metav1.ConditionTrue, reason: reason, message: msg}
}

// start begins an update to the image's release: in place when MinIO can
// take it, else by rolling.
func start(o observation, p params) action {
	release := o.binary.release
	if len(o.platforms) > 1 {
		// MinIO pushes the binary of the node called to every node, and
		// checks no architecture: some nodes would exec a binary they
		// cannot run.
		return rollBack(o, p, reason.Errorf(CauseMixedPlatforms, "the pods run on nodes of %d platforms (%s); MinIO updates every node with one binary, so a tenant on mixed platforms is not updated in place",
			len(o.platforms), strings.Join(o.platforms, ", ")))
	}
	want, err := releaseTime(release)
	if err != nil {
		return rollBack(o, p, reason.Wrap(CauseBinaryUnavailable, err))
	}
	var old, same, newer, offline []string
	for _, n := range o.nodes {
		t, err := releaseTime(n.release)
		switch {
		case !n.online:
			offline = append(offline, n.endpoint)
		case err != nil || t.Before(want):
			old = append(old, n.endpoint)
		case t.After(want):
			newer = append(newer, n.endpoint+" ("+n.release+")")
		default:
			same = append(same, n.endpoint)
		}
	}
	switch {
	case len(newer) > 0:
		return rollBack(o, p, reason.Errorf(CauseDowngrade, "nodes %s run a newer release than %s; MinIO updates in place only forward",
			strings.Join(newer, ", "), release))
	case len(offline) > 0:
		// An update now would leave these nodes behind; wait for them.
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed, cause: CauseNodeOffline, after: 5 * p.poll,
			message: fmt.Sprintf("nodes %s are offline; the update to %s starts when every node is online", strings.Join(offline, ", "), release)}
	case len(old) == 0:
		// Every node runs a build of the release's time under another tag
		// (MinIO would answer "already the latest"), or reported none.
		return rollBack(o, p, reason.Errorf(CauseInPlaceRefused, "no node runs a release older than %s (nodes: %s); MinIO updates in place only to a newer release",
			release, describeNodes(o.nodes)))
	case o.urlErr != nil:
		return rollBack(o, p, reason.Wrap(CauseBinaryUnavailable, o.urlErr))
	case errors.Is(o.trustErr, errNoCertificateYet):
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll,
			message: fmt.Sprintf("waiting to update to %s: %v (the operator's /readyz says why); no tenant is called or rolled until it has one", release, o.trustErr)}
	case o.trustErr != nil:
		return rollBack(o, p, o.trustErr)
	}
	// A node that already runs the release answers "latest version" for
	// every node; ask one left behind, which pushes to the others.
	host := ""
	if len(same) > 0 {
		host = old[0]
	}
	up := &v1.UpdateStatus{Release: release, Image: o.image, Started: metav1.NewTime(o.now)}
	// The dry run first (dryrun.go): the real call follows only once
	// every node fetched and verified the binary.
	return callAction(o, up, host, true)
}

// callAction records one more call of up through host: a dry run, or
// the update itself.
func callAction(o observation, up *v1.UpdateStatus, host string, dry bool) action {
	next := *up
	next.LastCall = metav1.NewTime(o.now)
	if dry {
		next.DryRuns++
		return action{verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, update: &next, host: host, dryRun: true, phase: phaseVerifying,
			message: fmt.Sprintf("asked MinIO for a dry run of %s from %s: every node fetches and verifies the binary, nothing restarts (dry run %d)", next.Release, o.updateURL, next.DryRuns)}
	}
	next.Calls++
	return action{verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, update: &next, host: host,
		message: fmt.Sprintf("asked MinIO to update to %s from %s", next.Release, o.updateURL)}
}

// rollBack falls back to a rolling update: the StatefulSets get spec.image
// and the statefulset controller replaces the pods. why is said in the
// condition (act adds which StatefulSets it changed).
func rollBack(o observation, p params, why error) action {
	var took time.Duration
	if o.recorded != nil {
		took = o.now.Sub(o.recorded.Started.Time)
	}
	if o.paused && o.recorded == nil {
		return action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesPaused, cause: reason.Of(why),
			message: why.Error() + "; updates are paused by the annotation " + v1.UpdatesPausedAnnotation}
	}
	if o.fallback == v1.FallbackNone {
		return noFallback(o, p, why)
	}
	return action{verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate, cause: reason.Of(why),
		message: why.Error(), outcome: outcomeRolling, took: took, after: 5 * p.poll}
}
