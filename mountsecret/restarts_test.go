package mountsecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/fairshare"
	"github.com/object-store-operator/operator/internal/window"
	"github.com/object-store-operator/operator/test/fakeapi"
)

func TestHoldRestart(t *testing.T) {
	now := time.Date(2026, 11, 24, 1, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		paused bool
		window *window.Spec
		reason string
		after  time.Duration
	}{
		{name: "free to restart"},
		{name: "inside its window", window: &window.Spec{Schedule: "0 1 * * *", Duration: "1h"}},
		{name: "paused", paused: true, reason: ReasonRestartsPaused},
		{name: "paused inside its window", paused: true, window: &window.Spec{Schedule: "0 1 * * *", Duration: "1h"}, reason: ReasonRestartsPaused},
		{name: "before its window", window: &window.Spec{Schedule: "0 2 * * *", Duration: "1h"}, reason: ReasonOutsideWindow, after: 30 * time.Minute},
		// A window that parses but never opens again is the gate's
		// (internal/window TestTheGateSaysOneThingForEveryKindOfWork).
		{name: "a window that does not parse", window: &window.Spec{Schedule: "bad cron", Duration: "1h"}, reason: ReasonInvalidWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := holdRestart(tc.paused, tc.window, now, "referenced content changed: ca.crt")
			if tc.reason == "" {
				assert.Nil(t, h)
				return
			}
			require.NotNil(t, h)
			assert.Equal(t, tc.reason, h.reason)
			assert.Equal(t, tc.after, h.after)
			assert.Contains(t, h.message, "referenced content changed: ca.crt", "the message says what changed")
			if tc.after > 0 {
				assert.Contains(t, h.message, "2026-11-24T02:00:00Z", "and when the window opens")
			}
		})
	}
}

func TestRestartSlotsAreHeldUntilFreedAndWakeTheWaiting(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var woken []string
	r := newRestarts(2, time.Minute, clk, func(k string) { woken = append(woken, k) }, nil)
	for _, k := range []string{"a/1", "a/2"} {
		ok, _ := r.begin(k)
		require.True(t, ok, k)
	}
	ok, holders := r.begin("b/3")
	assert.False(t, ok)
	assert.Equal(t, []string{"a/1", "a/2"}, holders)
	ok, _ = r.begin("a/1")
	assert.True(t, ok, "a tenant keeps the slot it holds")

	start, held := r.since("a/1")
	require.True(t, held)
	assert.False(t, r.expired(start))
	clk.SetTime(clk.Now().Add(time.Minute))
	assert.True(t, r.expired(start), "a slot is held for the timeout at most")

	r.end("a/1")
	assert.Equal(t, []string{"b/3"}, woken, "the waiting tenant is queued again")
	ok, _ = r.begin("b/3")
	assert.True(t, ok)

	r.reset()
	r.slots.Adopt(fairshare.Holder{Key: "c/4", Party: "c"})
	r.slots.Adopt(fairshare.Holder{Key: "c/5", Party: "c"})
	r.slots.Adopt(fairshare.Holder{Key: "c/6", Party: "c"})
	ok, _ = r.begin("d/7")
	assert.False(t, ok, "restarts a previous leader began count, beyond the limit too")

	unlimited := newRestarts(0, 0, clk, func(string) {}, nil)
	for _, k := range []string{"1", "2", "3"} {
		ok, _ := unlimited.begin(k)
		assert.True(t, ok, "0: no limit")
	}
}

func TestRolledOutNeedsTheRestartValueOnEveryReadyReplica(t *testing.T) {
	three := int32(3)
	set := func(restart string, gen, observed int64, updated, ready int32, current, update string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.StatefulSetSpec{Replicas: &three}}
		s.Spec.Template.Annotations = map[string]string{RestartAnnotation: restart}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: observed, UpdatedReplicas: updated, ReadyReplicas: ready,
			CurrentRevision: current, UpdateRevision: update}
		return s
	}
	assert.True(t, rolledOut(set("v2", 2, 2, 3, 3, "r2", "r2"), "v2"))
	assert.False(t, rolledOut(set("v1", 2, 2, 3, 3, "r2", "r2"), "v2"), "the cache has not seen the patch yet")
	assert.False(t, rolledOut(set("v2", 2, 1, 3, 3, "r1", "r1"), "v2"), "the statefulset controller has not seen it")
	assert.False(t, rolledOut(set("v2", 2, 2, 2, 3, "r1", "r2"), "v2"), "one pod still runs the old template")
	assert.False(t, rolledOut(set("v2", 2, 2, 3, 2, "r2", "r2"), "v2"), "one pod is not ready")
}

// rotatedFixture is a leader whose tenant t/s has its generated Secret
// and StatefulSet in place, and whose server certificate was then
// rotated: the next sync restarts the tenant unless something holds it.
func rotatedFixture(t *testing.T, configure func(*Config), annotations map[string]any) (*fixture, *corev1.Secret) {
	t.Helper()
	cert, key := pair(t, "s.t.svc")
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-tls", Namespace: "t", ResourceVersion: "1"},
		Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	store := objectStore("s-tls")
	f := newFixtureWith(t, configure, store, []*corev1.Secret{tls}, []*appsv1.StatefulSet{tenantStatefulSet()})
	f.lead()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	f.catchUp()
	f.settle("t")
	require.NoError(t, f.c.sync(context.Background(), "t/s"), "the first restart ends")
	_, held := f.c.restarts.since("t/s")
	require.False(t, held)
	f.Actions()
	drain(f)

	cert2, key2 := pair(t, "s.t.svc")
	tls = tls.DeepCopy()
	tls.ResourceVersion = "2"
	tls.Data = map[string][]byte{"tls.crt": cert2, "tls.key": key2}
	_, err := f.Kube.CoreV1().Secrets("t").Update(context.Background(), tls, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.meta.GetIndexer().Update(&metav1.PartialObjectMetadata{ObjectMeta: tls.ObjectMeta}))
	if annotations != nil {
		u, err := f.Dynamic.Resource(v1.Resource).Namespace("t").Get(context.Background(), "s", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, annotations, "metadata", "annotations"))
		_, err = f.Dynamic.Resource(v1.Resource).Namespace("t").Update(context.Background(), u, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	f.catchUp()
	return f, tls
}

// settle makes namespace's StatefulSets look rolled out and ready, as the
// statefulset controller and kubelets leave them.
func (f *fixture) settle(namespace string) {
	f.t.Helper()
	for _, obj := range f.sets.GetIndexer().List() {
		s := obj.(*appsv1.StatefulSet).DeepCopy()
		if s.Namespace != namespace {
			continue
		}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1,
			CurrentRevision: "r", UpdateRevision: "r"}
		require.NoError(f.t, f.sets.GetIndexer().Update(s))
	}
}

// drain empties the fake recorder and returns its events.
func drain(f *fixture) []string {
	var events []string
	for {
		select {
		case e := <-f.c.cfg.Recorder.(*record.FakeRecorder).Events:
			events = append(events, e)
		default:
			return events
		}
	}
}

func TestARestartIsOneEventSayingWhatChanged(t *testing.T) {
	f, _ := rotatedFixture(t, nil, nil)
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, []string{"get secrets", "update secrets", "patch statefulsets"}, f.Actions()[:3])
	events := drain(f)
	restarts := slices.DeleteFunc(slices.Clone(events), func(e string) bool { return !strings.HasPrefix(e, "Normal Restarting ") })
	require.Len(t, restarts, 1, "one Event per restart: %v", events)
	assert.Contains(t, restarts[0], "s-pool-0")
	assert.Contains(t, restarts[0], "referenced content changed: s-tls")
}

// A sync right after a restart (woken by the Secret or the status it
// wrote) may run before the StatefulSets' cache has seen its patch: they
// still look behind. Before, it patched them again (to the value they
// already had: no roll) and recorded another Restarting Event, "do not
// mount the current certificates", which the recorder merged into an
// earlier Event of that message as a count:
// TestASharedCARotationRestartsTheFleetFiveAtATime counted three
// Restarting Events for a tenant restarted twice.
func TestASyncOnACacheBehindItsOwnRestartRestartsNothingAgain(t *testing.T) {
	f, _ := rotatedFixture(t, nil, nil)
	f.versionStatefulSets()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	require.Contains(t, f.Actions(), "patch statefulsets")
	f.catchUpButStatefulSets()

	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	restarts := slices.DeleteFunc(drain(f), func(e string) bool { return !strings.HasPrefix(e, "Normal Restarting ") })
	assert.Len(t, restarts, 1, "one Event for one restart: %v", restarts)
	_, held := f.c.restarts.since("t/s")
	assert.True(t, held, "the restart holds its slot until its pods are ready")

	f.catchUp()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.NotContains(t, f.Actions(), "patch statefulsets", "caught up: nothing is behind")
	f.settle("t")
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	_, held = f.c.restarts.since("t/s")
	assert.False(t, held, "rolled out and ready: the slot is free")
	assert.Empty(t, slices.DeleteFunc(drain(f), func(e string) bool { return !strings.HasPrefix(e, "Normal Restarting ") }))
}

// versionStatefulSets makes the fake API keep StatefulSets' resource
// versions as the apiserver does for a patch: a resourceVersion in the
// patch must be the stored one (409 Conflict otherwise), and a patch
// that goes through bumps it. The fake tracker does neither.
func (f *fixture) versionStatefulSets() {
	f.t.Helper()
	gvr := appsv1.SchemeGroupVersion.WithResource("statefulsets")
	f.Kube.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		obj, err := f.Kube.Tracker().Get(gvr, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		live := obj.(*appsv1.StatefulSet)
		var patch appsv1.StatefulSet
		if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		if patch.ResourceVersion != "" && patch.ResourceVersion != live.ResourceVersion {
			return true, nil, apierrors.NewConflict(appsv1.Resource("statefulsets"), live.Name, errors.New("the object has been modified"))
		}
		rv, _ := strconv.Atoi(live.ResourceVersion)
		live.ResourceVersion = strconv.Itoa(rv + 1)
		if live.Spec.Template.Annotations == nil {
			live.Spec.Template.Annotations = map[string]string{}
		}
		maps.Copy(live.Spec.Template.Annotations, patch.Spec.Template.Annotations)
		return true, live, f.Kube.Tracker().Update(gvr, live, live.Namespace)
	})
}

func TestPausedRestartsLeaveTheSecretAndThePodsAsTheyWere(t *testing.T) {
	f, _ := rotatedFixture(t, nil, map[string]any{v1.RestartsPausedAnnotation: "true"})
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, []string{"get secrets", "patch objectstores/status"}, f.Actions(),
		"the new data is read; only the condition is written")
	c := certificatesReady(t, f)
	assert.Equal(t, ReasonRestartsPaused, c.Reason)
	assert.Contains(t, c.Message, "referenced content changed: s-tls")
	assert.Empty(t, drain(f)[1:], "no restart Event") // the condition's own Event only
}

func TestATenantWaitsForARestartSlotAndGetsItWhenTheHolderIsReady(t *testing.T) {
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = time.Hour }
	f, _ := rotatedFixture(t, one, nil)
	// Another tenant took the one slot first.
	ok, _ := f.c.restarts.begin("u/other")
	require.True(t, ok)

	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, []string{"get secrets", "patch objectstores/status"}, f.Actions(), "nothing restarted")
	c := certificatesReady(t, f)
	assert.Equal(t, ReasonRestartQueued, c.Reason)
	assert.Contains(t, c.Message, "held by 1 ObjectStores of other namespaces", "counted, not named: no tenant reads another's names")
	assert.NotContains(t, c.Message, "u/other")

	f.c.restarts.end("u/other")
	assert.Equal(t, 1, f.c.queue.Len(), "the waiting tenant is queued again")
	f.catchUp()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Contains(t, f.Actions(), "patch statefulsets")
	_, held := f.c.restarts.since("t/s")
	assert.True(t, held, "the tenant holds the slot while its pods restart")

	f.catchUp()
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	_, held = f.c.restarts.since("t/s")
	assert.True(t, held, "patched but not rolled out")
	f.settle("t")
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	_, held = f.c.restarts.since("t/s")
	assert.False(t, held, "rolled out and ready: the slot is free")
}

func certificatesReady(t *testing.T, f *fixture) metav1.Condition {
	t.Helper()
	u, err := f.Dynamic.Resource(v1.Resource).Namespace("t").Get(context.Background(), "s", metav1.GetOptions{})
	require.NoError(t, err)
	store, err := v1.FromUnstructured(u)
	require.NoError(t, err)
	for _, c := range store.Status.Conditions {
		if c.Type == v1.ConditionCertificatesReady {
			return c
		}
	}
	t.Fatal("no CertificatesReady condition")
	return metav1.Condition{}
}

func TestARestartThatNeverGetsReadyGivesItsSlotUpAfterTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = 10 * time.Minute; c.Clock = clk }
	f, _ := rotatedFixture(t, one, nil)
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	f.catchUp()
	drain(f)
	ok, _ := f.c.restarts.begin("u/next")
	require.False(t, ok, "t/s holds the one slot while its pods restart")

	clk.SetTime(clk.Now().Add(10 * time.Minute))
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	_, held := f.c.restarts.since("t/s")
	assert.False(t, held, "the pods never got ready: the slot is given up")
	assert.Equal(t, 1, f.c.queue.Len(), "and the waiting tenant is queued")
	events := drain(f)
	require.NotEmpty(t, events)
	assert.Contains(t, events[0], "Warning RestartTimeout")
}

// tenantHoldsTheSlot is a leader with one restart slot (10 minutes at
// most, on clk) that t/s took for its rotation, its pods not ready yet.
func tenantHoldsTheSlot(t *testing.T, clk *clocktesting.FakePassiveClock) *fixture {
	t.Helper()
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = 10 * time.Minute; c.Clock = clk }
	f, _ := rotatedFixture(t, one, nil)
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	require.Contains(t, f.Actions(), "patch statefulsets")
	f.catchUp()
	drain(f)
	_, held := f.c.restarts.since("t/s")
	require.True(t, held)
	return f
}

// The tenant breaks its own inputs while it holds a slot: the sync ends
// on SecretNotFound before it looks at the restart, and before the fix
// the slot was never given up.
func TestATenantThatBreaksItsSecretWhileRestartingStillGivesItsSlotUpAfterTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := tenantHoldsTheSlot(t, clk)
	require.NoError(t, f.Kube.CoreV1().Secrets("t").Delete(context.Background(), "s-tls", metav1.DeleteOptions{}))
	require.NoError(t, f.meta.GetIndexer().Delete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s-tls", Namespace: "t"}}))

	clk.SetTime(clk.Now().Add(10 * time.Minute))
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, ReasonSecretNotFound, certificatesReady(t, f).Reason)
	ok, holders := f.c.restarts.begin("u/next")
	assert.True(t, ok, "the other tenant gets the slot; held by %v", holders)
}

// The tenant edits its StatefulSet's restart annotation (or a GitOps
// tool reverts it) right as its slot times out: before the fix the same
// sync freed the slot and took it again, so the tenant kept it forever
// while the others waited.
func TestATimedOutTenantDoesNotTakeItsSlotAgainWhileOthersWait(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := tenantHoldsTheSlot(t, clk)
	ok, _ := f.c.restarts.begin("u/next")
	require.False(t, ok, "u/next waits for the slot")

	s, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	s.Spec.Template.Annotations[RestartAnnotation] = "tenant-edit"
	_, err = f.Kube.AppsV1().StatefulSets("t").Update(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.catchUp()

	clk.SetTime(clk.Now().Add(10 * time.Minute))
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.NotContains(t, f.Actions(), "patch statefulsets", "t/s does not restart again ahead of the waiting tenant")
	assert.Equal(t, ReasonRestartQueued, certificatesReady(t, f).Reason)
	ok, holders := f.c.restarts.begin("u/next")
	assert.True(t, ok, "the waiting tenant gets the slot; held by %v", holders)
}

// A StatefulSet left rolling when the leader changed holds a slot for
// the new leader (adopt). Before the fix nothing ever looked at it again
// unless the StatefulSet changed: a tenant's StatefulSet annotated with a
// name no ObjectStore has, or whose pods never become ready, held the
// slot for as long as the new leader led.
func TestARestartANewLeaderAdoptsGivesItsSlotUpAfterTheTimeout(t *testing.T) {
	// In a bubble: the timeout passes on the fake clock.
	synctest.Test(t, testARestartANewLeaderAdoptsGivesItsSlotUpAfterTheTimeout)
}

func testARestartANewLeaderAdoptsGivesItsSlotUpAfterTheTimeout(t *testing.T) {
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = 200 * time.Millisecond }
	f, _ := rotatedFixture(t, one, nil)
	// The queue's delaying loop ends with the bubble.
	t.Cleanup(f.c.queue.ShutDown)
	f.settle("t") // t/s runs its pods, ready
	// A tenant whose pods never become ready (a name no ObjectStore has
	// is not adopted at all: TestANewLeaderAdoptsForgedRestartsOnlyWithinTheLimits).
	ghost, err := f.Dynamic.Resource(v1.Resource).Namespace("t").Create(context.Background(),
		fakeapi.UnstructuredObjectStore("t", "ghost", map[string]any{}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.c.stores.Add(ghost))
	require.NoError(t, f.sets.GetIndexer().Add(rollingSet("t", "ghost")))
	f.c.adoptRestarts()

	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	require.Equal(t, ReasonRestartQueued, certificatesReady(t, f).Reason, "t/ghost holds the one slot")
	require.Eventually(t, func() bool {
		for f.c.queue.Len() > 0 {
			key, _ := f.c.queue.Get()
			err := f.c.sync(context.Background(), key)
			// t/ghost's own sync meets a fixture whose Secret informer
			// does not see the Secret it created; only t/s is looked at.
			if key == "t/s" {
				require.NoError(t, err)
			}
			f.c.queue.Done(key)
		}
		_, held := f.c.restarts.since("t/s")
		return held
	}, 5*time.Second, 10*time.Millisecond, "t/s gets the slot once the adopted restart timed out")
}

// One namespace's ObjectStores (a tenant that creates many, their pods
// never ready) take no more than their share of the restart slots while
// other namespaces wait: before, every slot that freed could go to the
// same namespace, and the other tenants' rotations waited a timeout per
// OPERATOR_MAX_CONCURRENT_RESTARTS of its ObjectStores.
func TestOneNamespaceHoldsNoMoreThanItsShareOfRestartSlots(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := newRestarts(4, time.Minute, clk, func(string) {}, nil)
	for _, k := range []string{"h/1", "h/2", "h/3", "h/4"} {
		ok, _ := r.begin(k)
		require.True(t, ok, "%s: alone, a namespace may use every slot", k)
	}
	ok, _ := r.begin("t/s")
	require.False(t, ok, "every slot is taken")

	r.end("h/1")
	ok, holders := r.begin("h/5")
	assert.False(t, ok, "h holds 3 of 4 slots while t waits: more than its share")
	assert.Equal(t, []string{"h/2", "h/3", "h/4"}, holders, "it waits for its own namespace's restarts")
	ok, _ = r.begin("t/s")
	assert.True(t, ok, "the freed slot goes to the waiting namespace")

	r.end("t/s")
	r.end("h/2")
	ok, _ = r.begin("h/5")
	assert.True(t, ok, "nobody else waits: h may use the free slots again")
	ok, _ = r.begin("h/6")
	assert.True(t, ok)
}

// A tenant that no longer needs a restart (its StatefulSets gone, or
// already carrying the certificates) stops waiting for a slot: before, it
// stayed among the waiting for good, woken by every slot that freed and
// counted as a namespace contending for the slots.
func TestATenantThatNoLongerNeedsARestartStopsWaiting(t *testing.T) {
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = time.Hour }
	f, _ := rotatedFixture(t, one, nil)
	ok, _ := f.c.restarts.begin("u/other")
	require.True(t, ok)
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	require.Equal(t, ReasonRestartQueued, certificatesReady(t, f).Reason)
	f.catchUp()

	require.NoError(t, f.Kube.AppsV1().StatefulSets("t").Delete(context.Background(), "s-pool-0", metav1.DeleteOptions{}))
	require.NoError(t, f.sets.GetIndexer().Delete(tenantStatefulSet()))
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, ReasonCertificatesAssembled, certificatesReady(t, f).Reason)

	f.c.restarts.end("u/other")
	assert.Zero(t, f.c.queue.Len(), "nobody waits any more")
}

// A new leader counts restarts still rolling, not tenants whose rollout
// finished and whose pods later stopped being ready (a crash loop of
// their own): before, every such tenant took a slot, beyond the limit,
// for the timeout after each change of leader.
func TestANewLeaderAdoptsOnlyRestartsStillRolling(t *testing.T) {
	f, _ := rotatedFixture(t, func(c *Config) { c.MaxConcurrentRestarts = 3; c.RestartTimeout = time.Hour }, nil)
	f.settle("t")
	set := func(name string, status appsv1.StatefulSetStatus) {
		require.NoError(t, f.c.stores.Add(fakeapi.UnstructuredObjectStore("t", name, map[string]any{})))
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-pool-0", Namespace: "t", Generation: 2,
			Labels: map[string]string{v1.ObjectStoreLabel: name}}}
		s.Spec.Template.Annotations = map[string]string{RestartAnnotation: "v"}
		s.Status = status
		require.NoError(t, f.sets.GetIndexer().Add(s))
	}
	set("crashing", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 0,
		CurrentRevision: "r2", UpdateRevision: "r2"})
	set("rolling", appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 0, ReadyReplicas: 0,
		CurrentRevision: "r1", UpdateRevision: "r2"})
	set("unseen", appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1,
		CurrentRevision: "r1", UpdateRevision: "r1"})
	f.c.adoptRestarts()
	for key, want := range map[string]bool{"t/crashing": false, "t/rolling": true, "t/unseen": true, "t/s": false} {
		_, held := f.c.restarts.since(key)
		assert.Equal(t, want, held, key)
	}
}

// A waiting tenant is woken each time a slot frees; before, each wake
// rewrote its condition (the holders it named had changed) with an
// Event: a rotation of N tenants through M slots wrote about N*N/M
// statuses and Events, and the Event recorder's per-object spam filter
// (25 at once) then dropped the tenant's Restarting Event
// (TestASharedCARotationRestartsTheFleetFiveAtATime saw 1 of 2). Now it
// says once that it waits.
func TestAWaitingTenantSaysOnceThatItWaits(t *testing.T) {
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = time.Hour }
	f, _ := rotatedFixture(t, one, nil)
	holder := "u/0"
	ok, _ := f.c.restarts.begin(holder)
	require.True(t, ok)
	for i := 1; i <= 5; i++ {
		require.NoError(t, f.c.sync(context.Background(), "t/s"))
		f.catchUp()
		require.Equal(t, ReasonRestartQueued, certificatesReady(t, f).Reason)
		// The slot goes to another waiting tenant first.
		next := fmt.Sprintf("u/%d", i)
		f.c.restarts.begin(next)
		f.c.restarts.end(holder)
		ok, _ := f.c.restarts.begin(next)
		require.True(t, ok)
		holder = next
	}
	queued := slices.DeleteFunc(drain(f), func(e string) bool { return !strings.Contains(e, " "+ReasonRestartQueued+" ") })
	assert.Len(t, queued, 1, "one RestartQueued Event while it waits: %v", queued)
}

// The slot is taken before the Secret is written and the StatefulSets
// patched; when those writes fail, the sync is retried with a backoff
// that grows to many minutes. Before, only a patch that went through
// scheduled the look at the timeout, so a restart whose writes were
// refused held its slot until a retry happened to come.
func TestARestartWhoseWritesFailIsLookedAtWhenItTimesOut(t *testing.T) {
	// In a bubble: the timeout passes on the fake clock.
	synctest.Test(t, testARestartWhoseWritesFailIsLookedAtWhenItTimesOut)
}

func testARestartWhoseWritesFailIsLookedAtWhenItTimesOut(t *testing.T) {
	one := func(c *Config) { c.MaxConcurrentRestarts = 1; c.RestartTimeout = time.Hour }
	f, _ := rotatedFixture(t, one, nil)
	// The queue's delaying loop ends with the bubble.
	t.Cleanup(f.c.queue.ShutDown)
	// Short from here: the fixture's first restart looks again in an hour.
	f.c.restarts.timeout = 200 * time.Millisecond
	f.Kube.PrependReactor("patch", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(appsv1.Resource("statefulsets"), "s-pool-0", errors.New("an admission policy"))
	})
	require.Error(t, f.c.sync(context.Background(), "t/s"))
	_, held := f.c.restarts.since("t/s")
	require.True(t, held)
	require.Eventually(t, func() bool { return f.c.queue.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"t/s is synced again when its slot times out")
}

// TestARestartWaitsForTheTenantsWindow: spec.updates.window holds a
// certificate restart as it holds an update: outside it nothing of the
// tenant changes and the condition says when it opens; inside it, the
// restart goes ahead.
func TestARestartWaitsForTheTenantsWindow(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 25, 1, 30, 0, 0, time.UTC))
	f, _ := rotatedFixture(t, func(c *Config) { c.Clock = clk }, nil)
	u, err := f.Dynamic.Resource(v1.Resource).Namespace("t").Get(context.Background(), "s", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedStringMap(u.Object, map[string]string{"schedule": "0 2 * * *", "duration": "1h"},
		"spec", "updates", "window"))
	_, err = f.Dynamic.Resource(v1.Resource).Namespace("t").Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.catchUp()

	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Equal(t, []string{"get secrets", "patch objectstores/status"}, f.Actions(), "outside the window: only the condition")
	c := certificatesReady(t, f)
	assert.Equal(t, ReasonOutsideWindow, c.Reason)
	assert.Contains(t, c.Message, "2026-11-25T02:00:00Z", "when the window opens")

	f.catchUp()
	clk.SetTime(time.Date(2026, 11, 25, 2, 10, 0, 0, time.UTC))
	require.NoError(t, f.c.sync(context.Background(), "t/s"))
	assert.Contains(t, f.Actions(), "patch statefulsets", "inside the window the restart goes ahead")
	assert.Equal(t, ReasonCertificatesAssembled, certificatesReady(t, f).Reason)
}

// rollingSet is a StatefulSet of ObjectStore ns/name left rolling with a
// restart annotation, its pods not ready: what a previous leader's
// restart looks like, and what a tenant can forge.
func rollingSet(ns, name string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-pool-0", Namespace: ns, Generation: 2,
		Labels: map[string]string{v1.ObjectStoreLabel: name}}}
	s.Spec.Template.Annotations = map[string]string{RestartAnnotation: "v"}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 1, CurrentRevision: "r1", UpdateRevision: "r2"}
	return s
}

// A tenant forges StatefulSets that look like restarts left rolling (its
// own label, a restart annotation, pods never ready). A new leader adopts
// only restarts of ObjectStores that exist, within the limit, each
// namespace within its share: before, it adopted every one, beyond the
// limit, and the forger held every slot for OPERATOR_RESTART_TIMEOUT
// after each change of leader.
func TestANewLeaderAdoptsForgedRestartsOnlyWithinTheLimits(t *testing.T) {
	f, _ := rotatedFixture(t, func(c *Config) { c.MaxConcurrentRestarts = 4; c.RestartTimeout = time.Hour }, nil)
	f.settle("t")
	for i := range 10 {
		name := fmt.Sprintf("forged-%d", i)
		require.NoError(t, f.sets.GetIndexer().Add(rollingSet("hog", name)))
		if i < 6 { // the other four name no ObjectStore at all
			store := fakeapi.UnstructuredObjectStore("hog", name, map[string]any{})
			require.NoError(t, f.c.stores.Add(store))
		}
	}
	honest := fakeapi.UnstructuredObjectStore("u", "honest", map[string]any{})
	require.NoError(t, f.c.stores.Add(honest))
	require.NoError(t, f.sets.GetIndexer().Add(rollingSet("u", "honest")))
	f.c.adoptRestarts()

	held := map[string]int{}
	for _, h := range f.c.restarts.slots.Holders("") {
		held[namespaceOf(h.Key)]++
		_, exists, _ := f.c.stores.GetByKey(h.Key)
		assert.True(t, exists, "%s: adopted, but no ObjectStore has that name", h.Key)
	}
	assert.Equal(t, map[string]int{"hog": 2, "u": 1}, held,
		"four slots shared by the two namespaces with restarts left rolling: two each at most, the honest one needs one")
	ok, _ := f.c.restarts.begin("t/s")
	assert.True(t, ok, "a slot is left for a tenant that needs one now")
}

// With a tenant label, one party's namespaces share one share of the
// restart slots: before, each namespace was a party, and three namespaces
// of one tenant took three shares while another tenant waited.
func TestNamespacesOfOneTenantShareItsShareOfRestartSlots(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	acme := func(key string) string {
		if strings.HasPrefix(key, "acme-") {
			return "tenant:acme"
		}
		return namespaceOf(key)
	}
	r := newRestarts(4, time.Minute, clk, func(string) {}, acme)
	for _, k := range []string{"acme-a/1", "acme-b/1", "acme-c/1", "acme-a/2"} {
		ok, _ := r.begin(k)
		require.True(t, ok, "%s: alone, a tenant may use every slot", k)
	}
	ok, _ := r.begin("u/s")
	require.False(t, ok)
	r.end("acme-a/1")
	ok, _ = r.begin("acme-d/1")
	assert.False(t, ok, "acme holds 3 of 4 slots while u waits: a fourth namespace of it is no new party")
	ok, _ = r.begin("u/s")
	assert.True(t, ok, "the freed slot goes to the other tenant")
}
