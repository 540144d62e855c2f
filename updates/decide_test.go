package updates

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/window"
)

const (
	relOld    = "RELEASE.2026-01-10T10-00-00Z"
	relNew    = "RELEASE.2026-02-20T10-00-00Z"
	relNewer  = "RELEASE.2026-03-05T10-00-00Z"
	relHotfix = "RELEASE.2026-01-10T10-00-00Z.hotfix.abc123" // a hotfix of relOld
	imgNew    = "minio/aistor:new"
)

var (
	t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC) // a Tuesday
	p  = params{timeout: 10 * time.Minute, poll: 2 * time.Second, maxPoll: 10 * time.Minute, maxInFlight: 4, budget: 3}
)

// flights are updates in flight to release, one per key.
func flights(release string, keys ...string) []flight {
	out := make([]flight, len(keys))
	for i, k := range keys {
		out[i] = flight{key: k, release: release}
	}
	return out
}

func inWindow(schedule, duration string) func(*observation) {
	if _, err := window.Parse(schedule, duration); err != nil {
		panic(err)
	}
	return func(o *observation) { o.window = &window.Spec{Schedule: schedule, Duration: duration} }
}

func nodesOn(releases ...string) []node {
	out := make([]node, len(releases))
	for i, r := range releases {
		out[i] = node{endpoint: "n" + string(rune('0'+i)) + ":9000", online: r != "", release: r}
	}
	return out
}

// obs is a tenant on relOld whose image now holds relNew, available in
// the store, trusted, its StatefulSets still on the old image.
func obs(mut ...func(*observation)) observation {
	o := observation{
		now: t0, image: imgNew,
		binary:    binaryState{resolved: true, available: true, release: relNew},
		nodes:     nodesOn(relOld, relOld, relOld, relOld),
		sets:      setsState{count: 1},
		updateURL: "https://op:4221/webhook/v1/update/minio." + relNew + ".sha256sum",
	}
	for _, m := range mut {
		m(&o)
	}
	return o
}

func recorded(calls int, started, last time.Duration) func(*observation) {
	return func(o *observation) {
		o.recorded = &v1.UpdateStatus{Release: relNew, Image: imgNew, Calls: calls,
			Started: metav1.NewTime(t0.Add(-started)), LastCall: metav1.NewTime(t0.Add(-last))}
	}
}

func prevCondition(st metav1.ConditionStatus, reason string, since time.Duration) func(*observation) {
	return func(o *observation) {
		o.prev = &metav1.Condition{Type: v1.ConditionVersionCurrent, Status: st, Reason: reason, Message: "before",
			LastTransitionTime: metav1.NewTime(t0.Add(-since))}
	}
}

// TestDecide covers every reason of VersionCurrent (docs/updates.md) and
// the orderings that decide between them.
func TestDecide(t *testing.T) {
	unreachable := reason.Errorf(CauseTenantUnreachable, "MinIO admin API at https://t-hl.t.svc:9000: connection refused")
	for _, tc := range []struct {
		name   string
		o      observation
		verb   verb
		status metav1.ConditionStatus
		reason string
		host   string
		after  time.Duration
		phase  string
	}{
		{name: "older nodes, binary available: call MinIO through the endpoint",
			o: obs(), verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "every node on the release: the StatefulSets follow",
			o: obs(func(o *observation) { o.nodes = nodesOn(relNew, relNew) }), verb: setImage, status: metav1.ConditionTrue, reason: ReasonCurrent},
		{name: "current after an in-place update keeps saying so",
			o:    obs(func(o *observation) { o.nodes = nodesOn(relNew) }, prevCondition(metav1.ConditionTrue, ReasonUpdatedInPlace, time.Hour)),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonUpdatedInPlace},
		{name: "current and paused: the image is not even set",
			o:    obs(func(o *observation) { o.nodes, o.paused = nodesOn(relNew), true }),
			verb: report, status: metav1.ConditionTrue, reason: ReasonUpdatesPaused},
		{name: "paused before an update",
			o: obs(func(o *observation) { o.paused = true }), verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesPaused},
		{name: "the image is still being resolved",
			o: obs(func(o *observation) { o.binary = binaryState{} }), verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForBinary},
		{name: "the image's binary was refused: nothing is rolled",
			o:    obs(func(o *observation) { o.binary = binaryState{resolved: true, reason: "SignatureInvalid"} }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed},
		{name: "StatefulSets already on the image: wait for the nodes",
			o:    obs(func(o *observation) { o.sets.onImage = true }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForNodes, after: p.poll},
		{name: "a rolling update in progress is kept",
			o:    obs(func(o *observation) { o.sets.onImage = true }, prevCondition(metav1.ConditionFalse, ReasonRollingUpdate, time.Minute)),
			verb: report, status: metav1.ConditionFalse, reason: ReasonRollingUpdate, after: 5 * p.poll},
		{name: "no configuration, on the image: say so, no roll",
			o: obs(func(o *observation) {
				o.sets.onImage, o.nodes = true, nil
				o.reach = reason.Errorf(CauseConfigurationMissing, "spec.configuration is not set")
			}),
			verb: report, status: metav1.ConditionUnknown, reason: ReasonConfigurationMissing},
		{name: "no configuration, old image: roll",
			o: obs(func(o *observation) {
				o.nodes, o.reach = nil, reason.Errorf(CauseConfigurationMissing, "spec.configuration is not set")
			}),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "endpoint not answering yet, no StatefulSets: poll from 1 s, never a verdict",
			o:    obs(func(o *observation) { o.nodes, o.reach, o.sets = nil, unreachable, setsState{} }),
			verb: report, status: metav1.ConditionUnknown, reason: ReasonTenantUnreachable, after: time.Second},
		{name: "endpoint not answering for 40 s, image already matches: poll every 10 s, no roll",
			o: obs(func(o *observation) { o.nodes, o.reach, o.sets = nil, unreachable, setsState{count: 1, onImage: true} },
				prevCondition(metav1.ConditionUnknown, ReasonTenantUnreachable, 40*time.Second)),
			verb: report, status: metav1.ConditionUnknown, reason: ReasonTenantUnreachable, after: 10 * time.Second},
		{name: "endpoint not answering for a day: poll at most every maxPoll",
			o: obs(func(o *observation) { o.nodes, o.reach, o.sets = nil, unreachable, setsState{} },
				prevCondition(metav1.ConditionUnknown, ReasonTenantUnreachable, 24*time.Hour)),
			verb: report, status: metav1.ConditionUnknown, reason: ReasonTenantUnreachable, after: p.maxPoll},
		{name: "endpoint not answering a moment, old image on the StatefulSets: poll, no roll yet",
			o:    obs(func(o *observation) { o.nodes, o.reach = nil, unreachable }),
			verb: report, status: metav1.ConditionUnknown, reason: ReasonTenantUnreachable, after: time.Second},
		{name: "endpoint not answering for longer than the update timeout, old image: roll",
			o: obs(func(o *observation) { o.nodes, o.reach = nil, unreachable },
				prevCondition(metav1.ConditionUnknown, ReasonTenantUnreachable, 11*time.Minute)),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "a transient API error: retried with backoff, nothing written",
			o: obs(func(o *observation) { o.reach = errors.New("get Secret: etcdserver: timeout") }), verb: retry},
		{name: "a node newer than the image: MinIO updates only forward, roll",
			o:    obs(func(o *observation) { o.nodes = nodesOn(relOld, relNewer) }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "a node offline: wait for it",
			o:    obs(func(o *observation) { o.nodes = nodesOn(relOld, "") }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed, after: 5 * p.poll},
		{name: "mixed releases: ask a node left behind",
			o:    obs(func(o *observation) { o.nodes = nodesOn(relNew, relOld, relOld) }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, host: "n1:9000"},
		{name: "the tenant does not trust the upgrade server: roll, no call",
			o:    obs(func(o *observation) { o.trustErr = reason.Errorf(CauseOperatorNotTrusted, "unknown authority") }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "the release is not in this replica's store for the tenant: roll",
			o:    obs(func(o *observation) { o.urlErr = errors.New("not in this replica's store") }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "pods on one platform: call MinIO",
			o:    obs(func(o *observation) { o.platforms = []string{"linux/arm64"} }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "pods on mixed platforms: roll, no call",
			o:    obs(func(o *observation) { o.platforms = []string{"linux/amd64", "linux/arm64"} }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "pods on mixed platforms, paused: say so, no roll",
			o:    obs(func(o *observation) { o.platforms, o.paused = []string{"linux/amd64", "linux/arm64"}, true }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesPaused},
		{name: "pods on mixed platforms, every node current: the StatefulSets follow",
			o: obs(func(o *observation) {
				o.platforms, o.nodes = []string{"linux/amd64", "linux/arm64"}, nodesOn(relNew, relNew)
			}),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonCurrent},
		{name: "an image label that is no release tag: roll",
			o:    obs(func(o *observation) { o.binary.release = "latest" }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},

		// Hotfixes, as MinIO orders them: by release time alone.
		{name: "a hotfix label of the running release (the crash): current by MinIO's order, the StatefulSets get the image",
			o:    obs(func(o *observation) { o.binary.release = relHotfix }),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonCurrent},
		{name: "a hotfix of the running release with one node newer: roll, no call",
			o:    obs(func(o *observation) { o.binary.release, o.nodes = relHotfix, nodesOn(relOld, relNew) }),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "a hotfix of the running release with one node older: call through it",
			o: obs(func(o *observation) {
				o.binary.release, o.nodes = "RELEASE.2026-02-20T10-00-00Z.hotfix.abc", nodesOn(relNew, relOld)
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, host: "n1:9000"},
		{name: "a hotfix of a newer release: called in place",
			o:    obs(func(o *observation) { o.binary.release = "RELEASE.2026-03-05T10-00-00Z.hotfix.5f2e1c7a" }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "nodes report the hotfix's time after its update: updated in place",
			o: obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
				o.recorded.Release, o.binary.release = "RELEASE.2026-03-05T10-00-00Z.hotfix.5f2e1c7a", "RELEASE.2026-03-05T10-00-00Z.hotfix.5f2e1c7a"
				o.nodes = nodesOn(relNewer, relNewer)
			}),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonUpdatedInPlace},

		// A recorded update, followed.
		{name: "a call of this process still running: wait for its answer",
			o:    obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.call.running = true }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "recorded after a restart, nodes not there yet: follow, no call",
			o:    obs(recorded(1, 5*time.Second, 5*time.Second)),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "recorded after a restart, every node not there long after: follow, no second call",
			o:    obs(recorded(1, time.Minute, time.Minute)),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "recorded, every node on the release: updated in place",
			o:    obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.nodes = nodesOn(relNew, relNew) }),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonUpdatedInPlace},
		{name: "recorded, nodes left behind once settled: call one of them",
			o:    obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.nodes = nodesOn(relNew, relOld) }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, host: "n1:9000"},
		{name: "recorded, nodes left behind before they settled: wait",
			o:    obs(recorded(1, 5*time.Second, 5*time.Second), func(o *observation) { o.nodes = nodesOn(relNew, relOld) }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "recorded, nodes left behind after every call was made: wait for the timeout",
			o:    obs(recorded(maxCalls, time.Minute, time.Minute), func(o *observation) { o.nodes = nodesOn(relNew, relOld) }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "recorded past the timeout: roll",
			o:    obs(recorded(1, 11*time.Minute, 11*time.Minute)),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "the image changed under the update: start over",
			o:    obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.image = "minio/aistor:other" }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "MinIO refused the call: roll",
			o: obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
				o.call.result = &callResult{err: reason.Errorf(CauseInPlaceRefused, "MethodNotAllowed")}
			}),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "every node failed for good: roll",
			o: obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
				o.call.result = &callResult{failed: []string{"node n0:9000: permission denied"}}
			}),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate},
		{name: "nodes got a damaged copy: ask one of them again at once",
			o: obs(recorded(1, time.Second, time.Second), func(o *observation) {
				o.call.result = &callResult{failed: []string{"node n2:9000: wrong checksum"}, transient: 1, updated: 0}
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, host: "n2:9000"},
		// One disruption at a time: a rollout replacing the pods holds the
		// in-place update back, not a rolling update, not one recorded.
		{name: "the pods are being replaced: the update waits, naming the StatefulSets",
			o:    obs(func(o *observation) { o.sets.replacing = []string{"s-pool-0"} }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonWaitingForPods, after: 5 * p.poll},
		{name: "the pods are being replaced: a rolling update is not held (it supersedes the rollout)",
			o: obs(func(o *observation) {
				o.sets.replacing, o.platforms = []string{"s-pool-0"}, []string{"linux/amd64", "linux/arm64"}
			}),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate, phase: "Rolling"},
		// Fleet controls: the cap, the failure budget, the window.
		{name: "the fleet has its most updates in flight: queued, naming them",
			o:    obs(func(o *observation) { o.inFlight = flights(relNewer, "a/x", "b/y", "c/z", "d/w") }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll, phase: "Queued"},
		{name: "one place left in the fleet: call",
			o:    obs(func(o *observation) { o.inFlight = flights(relNewer, "a/x", "b/y", "c/z") }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, phase: phaseVerifying}, // the dry run first; "Updating n/m" from the real call: TestTheDryRunComesBeforeTheRealCall,
		{name: "the fleet full, a recorded update's nodes left behind: its own call is not held",
			o: obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
				o.nodes, o.inFlight = nodesOn(relNew, relOld), flights(relNew, "a/x", "b/y", "c/z", "d/w", "e/v")
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, host: "n1:9000", phase: "Updating 1/2"},
		{name: "the fleet full does not hold a rolling update (no in-place update in flight)",
			o: obs(func(o *observation) {
				o.platforms, o.inFlight = []string{"linux/amd64", "linux/arm64"}, flights(relNew, "a/x", "b/y", "c/z", "d/w")
			}),
			verb: roll, status: metav1.ConditionFalse, reason: ReasonRollingUpdate, phase: "Rolling"},
		{name: "a release not proven yet: the budget's namespaces update to it at once, no more",
			o:    obs(func(o *observation) { o.namespace, o.inFlight = "t", flights(relNew, "a/x", "b/y", "c/z") }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll, phase: "Queued"},
		{name: "a release not proven yet, two in flight and one failed: held",
			o: obs(func(o *observation) {
				o.namespace, o.inFlight, o.halt = "t", flights(relNew, "a/x", "b/y"), haltState{failed: 1}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll},
		{name: "a release not proven yet, two failed and one of them in flight again: counted once, call",
			o: obs(func(o *observation) {
				o.namespace, o.inFlight, o.halt = "t", flights(relNew, "a/x"), haltState{failed: 2, failedUnits: []string{"a", "b"}}
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "a release not proven yet, this namespace and another failed, a third in flight: this one may try again",
			o: obs(func(o *observation) {
				o.namespace, o.inFlight, o.halt = "t", flights(relNew, "c/x"), haltState{failed: 2, failedUnits: []string{"t", "b"}}
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "a release not proven yet, two failed, a third namespace in flight: held",
			o: obs(func(o *observation) {
				o.namespace, o.inFlight, o.halt = "t", flights(relNew, "c/x"), haltState{failed: 2, failedUnits: []string{"a", "b"}}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll},
		{name: "a release not proven yet, this namespace's labelled tenant failed in another namespace: it tries again counted once, call",
			o: obs(func(o *observation) {
				o.namespace, o.unit, o.inFlight = "t", "tenant:x", flights(relNew, "c/x")
				o.halt = haltState{failed: 2, failedUnits: []string{"tenant:x", "b"}}
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "a release not proven yet, two ObjectStores of this namespace failed, a third in flight, each its own unit: held",
			o: obs(func(o *observation) {
				o.namespace, o.unit, o.inFlight = "t", "t/new", flights(relNew, "t/z")
				o.inFlight[0].unit = "t/z"
				o.halt = haltState{failed: 2, failedUnits: []string{"t/x", "t/y"}}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateQueued, after: 5 * p.poll},
		{name: "a release not proven yet, two in flight, one of them in this namespace: call",
			o:    obs(func(o *observation) { o.namespace, o.inFlight = "t", flights(relNew, "a/x", "t/y", "b/z") }),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "a proven release: only the cap holds",
			o: obs(func(o *observation) {
				o.namespace, o.inFlight, o.halt = "t", flights(relNew, "a/x", "b/y", "c/z"), haltState{proven: true}
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "updates to the release halted: held, naming the failures",
			o: obs(func(o *observation) {
				o.halt = haltState{halted: true, list: []failure{{ObjectStore: "a/x", Cause: CauseInPlaceRefused, Message: "MethodNotAllowed"}}, since: t0}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesHalted, after: haltRecheck, phase: "Halted"},
		{name: "halted: a rolling update to the release is held too",
			o: obs(func(o *observation) {
				o.halt, o.platforms = haltState{halted: true, list: []failure{{ObjectStore: "a/x", Cause: CauseInPlaceRefused}}, since: t0}, []string{"linux/amd64", "linux/arm64"}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesHalted, after: haltRecheck},
		{name: "halted, the ObjectStore resumed for that release: call",
			o: obs(func(o *observation) {
				o.halt, o.resumed = haltState{halted: true, list: []failure{{ObjectStore: "a/x", Cause: CauseInPlaceRefused}}, since: t0}, relNew
			}),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "halted, the ObjectStore resumed for another release: held",
			o: obs(func(o *observation) {
				o.halt, o.resumed = haltState{halted: true, list: []failure{{ObjectStore: "a/x", Cause: CauseInPlaceRefused}}, since: t0}, relOld
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatesHalted, after: haltRecheck},
		{name: "halted, an update recorded before: it finishes",
			o: obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
				o.halt, o.nodes = haltState{halted: true, list: []failure{{ObjectStore: "a/x", Cause: CauseInPlaceRefused}}, since: t0}, nodesOn(relNew, relNew)
			}),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonUpdatedInPlace, phase: "Current"},
		{name: "the halt record could not be read: retried, nothing started",
			o:    obs(func(o *observation) { o.haltErr = errors.New("read the update halt record: timeout") }),
			verb: retry},
		{name: "window closed: held until it opens, which the message says",
			o:    obs(inWindow("0 12 * * *", "1h")),
			verb: report, status: metav1.ConditionFalse, reason: ReasonOutsideWindow, after: 2 * time.Hour, phase: "Window 12:00Z"},
		{name: "window closed, a week away: the date too",
			o:    obs(inWindow("0 2 * * 6", "1h"), func(o *observation) { o.now = t0.Add(-24 * time.Hour) }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonOutsideWindow, after: 4*24*time.Hour + 16*time.Hour, phase: "Window Nov 28 02:00Z"},
		{name: "window opening now: call",
			o:    obs(inWindow("0 10 * * *", "1h")),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "window open: call",
			o:    obs(inWindow("30 9 * * *", "1h")),
			verb: call, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace},
		{name: "window closed: a rolling update waits for it too",
			o:    obs(inWindow("0 12 * * *", "1h"), func(o *observation) { o.trustErr = reason.Errorf(CauseOperatorNotTrusted, "unknown authority") }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonOutsideWindow, after: 2 * time.Hour},
		{name: "window closed, an update recorded: it finishes",
			o:    obs(inWindow("0 12 * * *", "1h"), recorded(1, time.Minute, time.Minute)),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
		{name: "window closed, every node current: the StatefulSets follow",
			o:    obs(inWindow("0 12 * * *", "1h"), func(o *observation) { o.nodes = nodesOn(relNew) }),
			verb: setImage, status: metav1.ConditionTrue, reason: ReasonCurrent},
		{name: "window that does not parse: named, nothing started",
			o:    obs(func(o *observation) { o.window = &window.Spec{Schedule: "0 0 30 2 *", Duration: "1h"} }), // the schedule never fires
			verb: report, status: metav1.ConditionFalse, reason: ReasonInvalidWindow, phase: "Failed"},
		{name: "window closed and the fleet full: the window is what it says",
			o:    obs(inWindow("0 12 * * *", "1h"), func(o *observation) { o.inFlight = flights(relNew, "a/x", "b/y", "c/z", "d/w") }),
			verb: report, status: metav1.ConditionFalse, reason: ReasonOutsideWindow, after: 2 * time.Hour},

		{name: "some nodes updated: follow",
			o: obs(recorded(1, time.Second, time.Second), func(o *observation) {
				o.call.result = &callResult{failed: []string{"node n2:9000: permission denied"}, updated: 3}
			}),
			verb: report, status: metav1.ConditionFalse, reason: ReasonUpdatingInPlace, after: p.poll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := decide(tc.o, p)
			assert.Equal(t, tc.verb.String(), a.verb.String(), "verb (%s)", a.message)
			if tc.verb != retry {
				assert.Equal(t, tc.status, a.status, "status")
				assert.Equal(t, tc.reason, a.reason, "reason (%s)", a.message)
				assert.NotEmpty(t, a.message)
			}
			assert.Equal(t, tc.host, a.host, "node called through")
			if tc.phase != "" {
				assert.Equal(t, tc.phase, phaseOf(tc.o, a), "status.updatePhase")
			}
			if tc.after != 0 || a.verb == report {
				assert.Equal(t, tc.after, a.after, "requeue")
			}
			if a.verb == call {
				if tc.o.recorded == nil || tc.o.recorded.Calls == 0 && a.dryRun {
					// An update starts with its dry run, recorded as such.
					assert.True(t, a.dryRun, "a first call is the dry run")
					assert.Equal(t, 0, a.update.Calls, "no real call before a dry run passed")
					assert.Equal(t, 1, a.update.DryRuns, "the dry run is recorded before it is made")
				} else {
					assert.Equal(t, tc.o.recorded.Calls+1, a.update.Calls, "the call is recorded before it is made")
				}
				assert.Equal(t, t0, a.update.LastCall.Time)
			}
		})
	}
}

func TestReleasesOrderAsMinIOOrdersThem(t *testing.T) {
	assert.True(t, sameRelease(relOld, relHotfix), "a hotfix is its release's time to MinIO")
	assert.False(t, sameRelease(relOld, relNew))
	assert.True(t, sameRelease("weird", "weird"), "an unparsable release equals only itself")
	assert.False(t, sameRelease("", ""))
	for _, bad := range []string{"latest", "RELEASE.x", "RELEASE.2026-01-10T10-00-00Z.a.b.c", "release.2026-01-10T10-00-00Z"} {
		_, err := releaseTime(bad)
		assert.Error(t, err, bad)
	}
}

// FuzzDecide feeds random observations: decide never panics, never starts
// an update in place of a tenant on mixed platforms, and never
// calls twice for one recorded call (a call needs no running call, and,
// with one recorded, its last call settled or a damaged copy reported,
// under maxCalls; the record it writes counts the call). Every update
// starts with a dry run, and its real call follows only a dry run every
// node passed. No update starts
// (call or roll) outside the tenant's window, with its window invalid, or
// while its release is halted and the tenant did not resume it; no first
// call starts while the fleet has its most updates in flight.
func FuzzDecide(f *testing.F) {
	f.Add(relNew, relOld, relHotfix, "", uint8(0), uint8(0), int64(0), int64(0), uint8(0), uint8(0))
	f.Add(relHotfix, relOld, relOld, relOld, uint8(1), uint8(1), int64(60), int64(60), uint8(3), uint8(0))
	f.Add("RELEASE.2026-01-10T10-00-00Z.hotfix", "", "RELEASE.9999-99-99T99-99-99Z", "x", uint8(2), uint8(maxCalls), int64(-5), int64(700), uint8(255), uint8(0))
	f.Add(relNew, relOld, relOld, "", uint8(0), uint8(0), int64(0), int64(0), uint8(0), uint8(255))
	f.Add(relNew, relOld, relOld, relNew, uint8(0), uint8(1), int64(60), int64(60), uint8(0), uint8(0x55))
	windows := []func(*observation){inWindow("0 12 * * *", "1h"), inWindow("0 10 * * *", "1h"), inWindow("0 0 29 2 *", "168h"),
		func(o *observation) { o.window = &window.Spec{Schedule: "invalid", Duration: "1h"} }}
	f.Fuzz(func(t *testing.T, want, n0, n1, n2 string, flags, calls uint8, started, last int64, result, fleetFlags uint8) {
		o := observation{now: t0, image: imgNew, paused: flags&1 != 0,
			binary: binaryState{resolved: flags&2 == 0, available: flags&4 == 0, release: want},
			sets:   setsState{count: int(flags>>3) & 3, onImage: flags&32 != 0},
		}
		for i, r := range []string{n0, n1, n2} {
			if r != "" || flags&64 != 0 {
				o.nodes = append(o.nodes, node{endpoint: "n" + string(rune('0'+i)), online: r != "", release: r})
			}
		}
		switch flags >> 6 {
		case 1:
			o.reach = reason.Errorf(CauseTenantUnreachable, "refused")
		case 2:
			o.reach = errors.New("transient")
		case 3:
			o.reach = reason.Errorf(CauseConfigurationMissing, "missing")
		}
		if calls > 0 {
			o.recorded = &v1.UpdateStatus{Release: n2, Image: imgNew, Calls: int(calls % 8), DryRuns: int(calls>>3) & 3,
				Started: metav1.NewTime(t0.Add(-time.Duration(started) * time.Second)), LastCall: metav1.NewTime(t0.Add(-time.Duration(last) * time.Second))}
			o.call.running = result&1 != 0
			if result&2 != 0 {
				o.call.result = &callResult{updated: int(result>>4) & 3, transient: int(result>>2) & 3,
					failed: []string{"node n0: wrong checksum", "node n1: x", "node n2: y"}[:int(result>>6)&3], lost: fleetFlags&32 != 0}
			}
		}
		if result&128 != 0 {
			o.platforms = []string{"linux/amd64", "linux/arm64"}
		}
		if fleetFlags&4 != 0 {
			windows[fleetFlags&3](&o)
		}
		o.inFlight = flights(want, "a/1", "b/2", "c/3", "d/4", "e/5", "f/6", "g/7")[:(fleetFlags>>3)&7]
		o.namespace = "t"
		if result&4 != 0 {
			o.halt.proven = true
		}
		if fleetFlags&64 != 0 {
			o.halt = haltState{halted: true, list: []failure{{ObjectStore: "a/1", Cause: CauseInPlaceRefused}}, since: t0}
		}
		if fleetFlags&128 != 0 {
			o.resumed = want
		}
		a := decide(o, p)
		if o.recorded == nil && (a.verb == call || a.verb == roll) {
			closed := false
			if o.window != nil {
				w, err := window.Parse(o.window.Schedule, o.window.Duration)
				closed = err != nil || !w.Open(o.now)
			}
			if closed || (o.halt.halted && o.resumed != want) {
				t.Fatalf("an update started outside the window or while halted: %+v", a)
			}
			if a.verb == call && len(o.inFlight) >= p.maxInFlight {
				t.Fatalf("a first call with %d updates in flight: %+v", len(o.inFlight), a)
			}
			if a.verb == call && !o.halt.proven && o.resumed != want && len(o.inFlight)+o.halt.failed >= p.budget {
				t.Fatalf("a first call to an unproven release with %d in flight: %+v", len(o.inFlight), a)
			}
		}
		if a.verb != call {
			return
		}
		if len(o.platforms) > 1 && o.recorded == nil {
			t.Fatalf("an in-place update of a tenant on mixed platforms: %+v", a)
		}
		if o.call.running {
			t.Fatalf("a call while one is running: %+v", a)
		}
		if a.update == nil || a.update.LastCall.Time != t0 {
			t.Fatalf("a call not recorded: %+v", a)
		}
		res := o.call.result
		damaged := res != nil && !res.lost && len(res.failed) > 0 && len(res.failed) == res.transient
		passed := res != nil && !res.lost && res.err == nil && len(res.failed) == 0
		switch r := o.recorded; {
		case r == nil:
			if !a.dryRun || a.update.DryRuns != 1 || a.update.Calls != 0 {
				t.Fatalf("an update that does not start with its dry run: %+v", a.update)
			}
		case a.dryRun:
			// Again, before any real call: within maxCalls, its last one
			// settled or its copy damaged.
			if r.Calls != 0 || a.update.Calls != 0 || a.update.DryRuns != r.DryRuns+1 || r.DryRuns-r.Refusals >= maxCalls || (!damaged && t0.Sub(r.LastCall.Time) <= settle) {
				t.Fatalf("a dry run again for recorded %+v: %+v", r, a.update)
			}
		case r.Calls == 0:
			if !passed || a.update.Calls != 1 {
				t.Fatalf("a real call without a dry run every node passed (%+v), recorded %+v: %+v", res, r, a.update)
			}
		default:
			if a.update.Calls != r.Calls+1 || r.Calls-r.Refusals >= maxCalls || (!damaged && t0.Sub(r.LastCall.Time) <= settle) {
				t.Fatalf("a second call for recorded %+v: %+v", r, a.update)
			}
		}
	})
}

func TestAnUpdateWaitsForTheRolloutNamingItsStatefulSets(t *testing.T) {
	a := decide(obs(func(o *observation) { o.sets.replacing = []string{"s-pool-0", "s-pool-1"} }), p)
	assert.Equal(t, ReasonWaitingForPods, a.reason)
	assert.Contains(t, a.message, "StatefulSets s-pool-0, s-pool-1 are being replaced")
	assert.Contains(t, a.message, relNew)

	// An update already recorded finishes: the rollout waits for it
	// instead (rollout.ReasonWaitingForUpdate).
	a = decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
		o.sets.replacing, o.nodes = []string{"s-pool-0"}, nodesOn(relNew, relOld)
	}), p)
	assert.Equal(t, call, a.verb)
}
