package updates

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// dryRunRecorded is an update whose dry run (n of them) is recorded and
// no real call made.
func dryRunRecorded(n int, started, last time.Duration) func(*observation) {
	return func(o *observation) {
		o.recorded = &v1.UpdateStatus{Release: relNew, Image: imgNew, DryRuns: n,
			Started: metav1.NewTime(t0.Add(-started)), LastCall: metav1.NewTime(t0.Add(-last))}
	}
}

func answered(r callResult) func(*observation) {
	return func(o *observation) { o.call.result = &r }
}

func TestTheDryRunComesBeforeTheRealCall(t *testing.T) {
	a := decide(obs(), p)
	require.Equal(t, call, a.verb)
	assert.True(t, a.dryRun, "an update starts with its dry run")
	assert.Equal(t, 1, a.update.DryRuns)
	assert.Zero(t, a.update.Calls)
	assert.Equal(t, phaseVerifying, phaseOf(obs(), a))

	// Every node passed: the real call, counted as the first.
	passed := answered(callResult{updated: 4})
	a = decide(obs(dryRunRecorded(1, time.Second, time.Second), passed), p)
	require.Equal(t, call, a.verb, a.message)
	assert.False(t, a.dryRun)
	assert.Equal(t, 1, a.update.Calls)
	assert.Equal(t, "Updating 0/4", phaseOf(obs(dryRunRecorded(1, time.Second, time.Second), passed), a))

	// No answer yet: wait, never a real call.
	a = decide(obs(dryRunRecorded(1, time.Second, time.Second)), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, phaseVerifying, a.phase)
}

func TestADryRunTheNodesRefuseStopsCountedNeverRolled(t *testing.T) {
	refused := answered(callResult{updated: 0, failed: []string{
		"node n0:9000: unable to validate the minisig signature: invalid signature",
		"node n1:9000: unable to validate the minisig signature: invalid signature"}})
	o := obs(dryRunRecorded(1, time.Minute, time.Minute), refused)
	a := decide(o, p)
	assert.Equal(t, report, a.verb, "nothing rolled, nothing called")
	assert.Equal(t, ReasonDryRunFailed, a.reason)
	assert.Equal(t, CauseDryRunFailed, a.cause)
	assert.Contains(t, a.message, "invalid signature", "MinIO's own words")
	assert.Nil(t, a.update, "the update ends")
	assert.Equal(t, outcomeDryRunFailed, a.outcome)
	assert.True(t, countsAgainstRelease(a), "counted against the release like a failed update")
	require.NotNil(t, a.stopped)
	assert.Equal(t, t0.Add(stoppedRetry), a.stopped.RetryAt.Time)

	// MinIO refusing the dry run itself (its .sha256sum, say) is the same.
	a = decide(obs(dryRunRecorded(1, time.Minute, time.Minute), answered(callResult{err: reason.Errorf(CauseDryRunFailed, "MinIO at t:9000 failed the dry run: XMinioAdminUpdateUnexpectedFailure: 404")})), p)
	assert.Equal(t, ReasonDryRunFailed, a.reason)
	assert.True(t, countsAgainstRelease(a))

	// Even with the fallback None, it is the dry run's verdict.
	o.fallback = v1.FallbackNone
	assert.Equal(t, ReasonDryRunFailed, decide(o, p).reason)

	// MethodNotAllowed (MINIO_UPDATE=off) is no verdict on the binary:
	// the fallback, as for a refused call.
	a = decide(obs(dryRunRecorded(1, time.Minute, time.Minute), answered(callResult{err: reason.Errorf(CauseInPlaceRefused, "MethodNotAllowed")})), p)
	assert.Equal(t, roll, a.verb)
}

func TestADryRunMinIODamagedIsTriedAgainAndNeverHaltsTheRelease(t *testing.T) {
	damaged := answered(callResult{updated: 3, transient: 1, failed: []string{"node n1:9000: Updated file has wrong checksum. Expected: a, got: b"}})
	a := decide(obs(dryRunRecorded(1, time.Second, time.Second), damaged), p)
	require.Equal(t, call, a.verb, "dry-run again at once, through the damaged node")
	assert.True(t, a.dryRun)
	assert.Equal(t, "n1:9000", a.host)
	assert.Equal(t, 2, a.update.DryRuns)

	a = decide(obs(dryRunRecorded(maxCalls, time.Minute, time.Second), damaged), p)
	assert.Equal(t, report, a.verb, "damaged in every dry run: stopped, nothing restarted")
	assert.Equal(t, ReasonDryRunFailed, a.reason)
	assert.Equal(t, CauseBinaryDamagedByMinIO, a.cause)
	assert.False(t, countsAgainstRelease(a), "MinIO's hiccup does not count against the release")
	require.NotNil(t, a.stopped)
	assert.Equal(t, t0.Add(p.timeout), a.stopped.RetryAt.Time, "tried again sooner than a refused release")
}

func TestAStoppedUpdateIsHeldUntilItsRetryOrASpecChange(t *testing.T) {
	stopped := func(o *observation) {
		o.generation = 2
		o.stopped = &v1.StoppedUpdate{Release: relNew, Image: imgNew, Generation: 2, Reason: ReasonDryRunFailed,
			At: metav1.NewTime(t0.Add(-time.Minute)), RetryAt: metav1.NewTime(t0.Add(time.Minute))}
		o.prev = &metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionFalse, Reason: ReasonDryRunFailed, Message: "the dry run failed. Fix it"}
	}
	a := decide(obs(stopped), p)
	assert.Equal(t, report, a.verb, "not started again")
	assert.Equal(t, ReasonDryRunFailed, a.reason)
	assert.Equal(t, "the dry run failed. Fix it", a.message, "the stop's words, remedy and all")
	assert.Equal(t, time.Minute, a.after)

	a = decide(obs(stopped, func(o *observation) { o.now = t0.Add(2 * time.Minute) }), p)
	assert.Equal(t, call, a.verb, "its retry came")
	assert.True(t, a.dryRun)
	a = decide(obs(stopped, func(o *observation) { o.generation = 3 }), p)
	assert.Equal(t, call, a.verb, "the spec changed")
}

func TestTheFallbackNoneStopsWhereTheOperatorWouldRoll(t *testing.T) {
	none := func(o *observation) { o.fallback = v1.FallbackNone }
	for name, o := range map[string]observation{
		"mixed platforms":      obs(none, func(o *observation) { o.platforms = []string{"linux/amd64", "linux/arm64"} }),
		"a downgrade":          obs(none, func(o *observation) { o.nodes = nodesOn(relNewer, relNewer) }),
		"not trusted":          obs(none, func(o *observation) { o.trustErr = reason.Errorf(CauseOperatorNotTrusted, "unknown authority") }),
		"MinIO refused":        obs(none, recorded(1, time.Minute, time.Minute), answered(callResult{err: reason.Errorf(CauseInPlaceRefused, "MethodNotAllowed")})),
		"the update timed out": obs(none, recorded(1, p.timeout+time.Second, time.Minute)),
	} {
		t.Run(name, func(t *testing.T) {
			a := decide(o, p)
			assert.Equal(t, report, a.verb, "no StatefulSet changes: %s", a.message)
			assert.Equal(t, ReasonFallbackDisabled, a.reason)
			assert.NotEqual(t, ReasonFallbackDisabled, a.cause, "the cause is what would have rolled, for its remedy")
			assert.Contains(t, a.message, "the fallback is None")
			assert.Equal(t, phaseStopped, phaseOf(o, a))
			if o.recorded != nil {
				assert.Nil(t, a.update, "a called update ends")
				require.NotNil(t, a.stopped, "and is not started again at once")
				assert.Equal(t, outcomeStopped, a.outcome)
			}
		})
	}
	a := decide(obs(none, recorded(1, time.Minute, time.Minute), answered(callResult{err: reason.Errorf(CauseInPlaceRefused, "MethodNotAllowed")})), p)
	assert.True(t, countsAgainstRelease(a), "a refusal counts as when it rolled")
}

// TestAReleaseNoNodeAcceptsIsHaltedAfterTheBudgetsDryRuns: every
// tenant's MinIO refuses the binary's signature in the dry run. Three
// namespaces' dry runs fail (a release no update succeeded with reaches
// the budget's units first); the release is halted; the others are never
// asked; no real call is made and no StatefulSet is patched anywhere.
func TestAReleaseNoNodeAcceptsIsHaltedAfterTheBudgetsDryRuns(t *testing.T) {
	stores := tenantsInNamespaces(5)
	f, _, _ := haltFixtureWith(t, func(c *Config) { c.Reasons = reasonSet(t) }, stores...)
	for _, s := range stores {
		a := f.admin(s.GetNamespace(), s.GetName())
		a.refuse, a.dryRunFail = false, "unable to validate the minisig signature: invalid signature"
	}
	f.lead(t)
	for _, s := range stores {
		require.NoError(t, f.c.sync(t.Context(), s.GetNamespace()+"/tenant"))
	}
	for _, s := range stores {
		key := s.GetNamespace() + "/tenant"
		f.waitCallDone(t, key)
		f.catchUp(t, s.GetNamespace(), "tenant")
		require.NoError(t, f.c.sync(t.Context(), key))
	}
	for _, s := range stores {
		f.catchUp(t, s.GetNamespace(), "tenant")
		require.NoError(t, f.c.sync(t.Context(), s.GetNamespace()+"/tenant"))
	}
	reasons := map[string]int{}
	dryRuns := 0
	for _, s := range stores {
		ns := s.GetNamespace()
		live := f.live(t, ns, "tenant")
		reasons[conditionOf(live).Reason]++
		a := f.admin(ns, "tenant")
		dryRuns += a.dryRunCount()
		assert.Zero(t, a.realCalls(), "no real call in %s", ns)
		assert.Nil(t, live.Status.Update, "nothing in flight in %s", ns)
	}
	assert.Equal(t, map[string]int{ReasonDryRunFailed: 3, ReasonUpdatesHalted: 2}, reasons)
	assert.Equal(t, 3, dryRuns, "the budget's dry runs, one each")
	for _, act := range f.kube.Actions() {
		assert.False(t, act.GetResource().Resource == "statefulsets" && act.GetVerb() == "patch", "no StatefulSet changed: %v", act)
	}
	assert.Equal(t, 1.0, promtest.ToFloat64(f.c.halts.gauge.WithLabelValues(relNew)), "halted")
	assert.Equal(t, 3.0, promtest.ToFloat64(f.c.metrics.updates.WithLabelValues(outcomeDryRunFailed)))
	assert.Equal(t, 3.0, promtest.ToFloat64(f.c.metrics.calls.WithLabelValues(kindDryRun)))
	assert.Zero(t, promtest.ToFloat64(f.c.metrics.calls.WithLabelValues(kindUpdate)))
	c := conditionOf(f.live(t, stores[0].GetNamespace(), "tenant"))
	if c.Reason == ReasonDryRunFailed {
		assert.Contains(t, c.Message, "invalid signature", "MinIO's bounded words")
		assert.Contains(t, c.Message, "MINIO_UPDATE_MINISIGN_PUBKEY", "the remedy")
	}
}

// TestAHiccupInTheDryRunDoesNotHaltTheRelease: MinIO damages the copy of
// one node in the first dry run of every tenant, with a budget of 1. The
// dry run is made again, passes, and the real call follows: nothing is
// counted, nothing halted.
func TestAHiccupInTheDryRunDoesNotHaltTheRelease(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.FailureBudget, c.HaltNamespace = 1, "ops" }, fakeBinaries{}, tenantStore("t", "tenant"))
	a := f.admin("t", "tenant")
	a.damaged = 1
	f.lead(t)
	f.dryRun(t, "t", "tenant")
	f.dryRun(t, "t", "tenant") // the damaged answer: again
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	assert.Equal(t, 2, a.dryRunCount())
	assert.Equal(t, 1, a.realCalls(), "the real call followed the clean dry run")
	for _, act := range f.kube.Actions() {
		assert.False(t, act.GetResource().Resource == "leases" && act.GetVerb() != "get", "nothing counted: %v", act)
	}
}

// TestTheFallbackNoneChangesNoStatefulSet: MinIO refuses the update
// (MINIO_UPDATE=off); with spec.updates.fallback None nothing is rolled,
// the condition names the cause and both remedies, and the next look
// calls nothing.
func TestTheFallbackNoneChangesNoStatefulSet(t *testing.T) {
	s := tenantStore("t", "tenant")
	s.Object["spec"].(map[string]any)["updates"] = map[string]any{"fallback": v1.FallbackNone}
	f := newFixtureWith(t, func(c *Config) {
		c.Reasons = reasonSet(t)
	}, fakeBinaries{}, s)
	f.admin("t", "tenant").refuse = true
	f.lead(t)
	f.dryRun(t, "t", "tenant")
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	live := f.live(t, "t", "tenant")
	c := conditionOf(live)
	assert.Equal(t, ReasonFallbackDisabled, c.Reason)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "MethodNotAllowed", "MinIO's words")
	assert.Contains(t, c.Message, "MINIO_UPDATE=off", "the cause's remedy")
	assert.Contains(t, c.Message, "spec.updates.fallback: Rolling", "what None asks")
	assert.Equal(t, phaseStopped, live.Status.UpdatePhase)
	require.NotNil(t, live.Status.Stopped)
	for _, act := range f.kube.Actions() {
		assert.False(t, act.GetResource().Resource == "statefulsets" && act.GetVerb() == "patch", "no StatefulSet changed: %v", act)
	}
	f.catchUp(t, "t", "tenant")
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	assert.Equal(t, 1, f.admin("t", "tenant").callCount(), "not started again")
	assert.Equal(t, ReasonFallbackDisabled, conditionOf(f.live(t, "t", "tenant")).Reason)
}

// TestTheOperatorsDefaultFallbackAppliesWhereTheSpecSaysNone: Config's
// fallback holds for an ObjectStore that sets none; its own wins.
func TestTheOperatorsDefaultFallbackAppliesWhereTheSpecSaysNothing(t *testing.T) {
	c := &Controller{cfg: Config{Fallback: v1.FallbackNone}}
	store := &v1.ObjectStore{}
	assert.Equal(t, v1.FallbackNone, c.fallbackOf(store))
	store.Spec.Updates.Fallback = v1.FallbackRolling
	assert.Equal(t, v1.FallbackRolling, c.fallbackOf(store))
	assert.Equal(t, v1.FallbackRolling, (&Controller{}).fallbackOf(&v1.ObjectStore{}), "unset everywhere: Rolling, as before the setting")

	_, err := New(Config{Fallback: "Never", Secrets: apiSecrets{}, Workers: 1, Timeout: time.Minute, Poll: time.Second, MaxPoll: time.Second, CallsPerNamespace: 1,
		Registerer: prometheus.NewRegistry(), Clock: clocktesting.NewFakeClock(t0)})
	assert.ErrorContains(t, err, "neither Rolling nor None")
}

func reasonSet(t *testing.T) reason.Set {
	set, err := reason.Spell(Reasons(), func(flag string) (string, bool) { return "OPERATOR_" + flag, true })
	require.NoError(t, err)
	return set
}
