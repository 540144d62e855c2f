package updates

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// unconvertibleStarted passes the CRD's `format: date-time` (the
// apiserver's strfmt.IsDateTime lower-cases before it checks) but not
// metav1.Time's RFC 3339 parse: the ObjectStore no longer converts, and
// the updates loop skips it (Loop.sync; updates has no InvalidReporter).
const unconvertibleStarted = "2026-01-01t00:00:00z"

// forgeUnconvertible writes, as a tenant allowed objectstores/status
// would, a status.update on s whose started the apiserver accepts and
// v1.FromUnstructured does not.
func forgeUnconvertible(t *testing.T, s *unstructured.Unstructured) {
	t.Helper()
	require.True(t, strfmt.IsDateTime(unconvertibleStarted), "the apiserver's date-time check accepts it")
	require.NoError(t, unstructured.SetNestedMap(s.Object, map[string]any{
		"release": relNew, "image": imgNew, "started": unconvertibleStarted, "calls": int64(1), "lastCall": unconvertibleStarted,
	}, "status", "update"))
	_, err := v1.FromUnstructured(s)
	require.Error(t, err, "the ObjectStore must not convert")
}

// A tenant allowed to write objectstores/status leaves on its
// ObjectStore a status.update whose started passes the CRD's date-time
// check but not Go's RFC 3339 parse, and waits for a leader change (an
// upgrade, a drain). fleet.adopt reads status.update off the unstructured
// cache and adopts it; the ObjectStore never converts, so the updates
// loop never reconciles the key, follow never sees the timeout, and
// nothing would ever end its place: such a record is not adopted.
func TestAnUnconvertibleRecordFoundAtTermStartHoldsNoPlacePastTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	hostile := tenantStore("hostile", "h0")
	forgeUnconvertible(t, hostile)
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Clock = 1, clk }, fakeBinaries{}, hostile, tenantStore("good", "tenant"))
	f.lead(t)                // the term begins with the record in the cache
	clk.Step(24 * time.Hour) // the update timeout is a minute
	require.NoError(t, f.c.sync(t.Context(), "hostile/h0"))
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	c := conditionOf(f.live(t, "good", "tenant"))
	assert.NotEqual(t, ReasonUpdateQueued, c.Reason,
		"a day past the update's timeout, the unconvertible record still holds the fleet's one place (holds: %v): %s", f.c.fleet.holds("hostile/h0"), c.Message)
}

// The same record, naming a release no update has succeeded to yet,
// takes none of the failure budget's "first unit" places for it either
// (firstUnits counts the release of each place held).
func TestAnUnconvertibleRecordFoundAtTermStartHoldsNoFirstUnitOfTheBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	hostile := tenantStore("hostile", "h0")
	forgeUnconvertible(t, hostile)
	f := newFixtureWith(t, func(c *Config) {
		c.FailureBudget, c.HaltNamespace, c.Clock = 1, "ops", clk
	}, fakeBinaries{}, hostile, tenantStore("good", "tenant"))
	f.lead(t)
	clk.Step(24 * time.Hour)
	require.NoError(t, f.c.sync(t.Context(), "hostile/h0"))
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	c := conditionOf(f.live(t, "good", "tenant"))
	assert.NotEqual(t, ReasonUpdateQueued, c.Reason,
		"a day past the update's timeout, the unconvertible record still holds the budget's first unit for %s: %s", relNew, c.Message)
}

// The tenant removes spec.image while its update call is held open by
// its MinIO, and puts it back: "waiting for MinIO to answer an update
// call made before spec.image last changed", which the cache comes to
// hold. The tenant's MinIO answers; the next sync starts the update
// again: recorded, its place taken, its call held open. A sync on a cache
// that lags that record (nothing recorded, the same condition) once
// decided that wait again without a write, so no conflict sent it to the
// live object, and ended the place the update holds: the cap (one) let
// another tenant's update start beside it. The wait is decided on the
// live object now (startCall).
func TestASyncOnACacheBehindARecordKeepsItsPlace(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("good", "tenant")}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Timeout = 1, time.Hour }, fakeBinaries{}, stores...)
	// The dry run is recorded and held open by the tenant's MinIO.
	g := f.holdFirstCall(t)
	ctx := t.Context()
	// spec.image removed (the record ends) and put back (the call still runs).
	f.tenantSetsImage(t, "hostile", "h0", "")
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	f.tenantSetsImage(t, "hostile", "h0", imgNew)
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	f.catchUp(t, "hostile", "h0")
	// The tenant's MinIO answers the first dry run.
	g.mu.Lock()
	close(g.gates[0])
	g.mu.Unlock()
	f.waitCallDone(t, "hostile/h0")
	// The update starts again: recorded, its place taken, its call open.
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	require.NotNil(t, f.live(t, "hostile", "h0").Status.Update)
	require.Eventually(t, func() bool { _, r, _ := g.counts(); return r == 1 }, 5*time.Second, time.Millisecond)
	require.True(t, f.c.fleet.holds("hostile/h0"))
	// A sync on the cache that does not show the record yet.
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	f.catchUp(t, "hostile", "h0")
	require.NotNil(t, f.live(t, "hostile", "h0").Status.Update, "the update is still recorded")

	require.NoError(t, f.c.sync(ctx, "good/tenant"))
	c := conditionOf(f.live(t, "good", "tenant"))
	assert.True(t, f.c.fleet.holds("hostile/h0"), "the recorded update in flight lost its place")
	assert.Equal(t, ReasonUpdateQueued, c.Reason,
		"the fleet's one place is taken by hostile/h0's recorded update, yet another tenant's update started: %s", c.Message)
}

// A tenant allowed to write objectstores/status keeps forged records
// (started now, so the clock check passes) for a new term to find. They
// are adopted within its unit's share, which is the whole cap when its
// unit is the only one found (as a fresh start would let it take every
// place), and hold the fleet's places until the update's timeout, no
// longer: each is then ended (the tenant's own pods rolled), and the
// honest tenant starts. A leader change is not the tenant's to make.
func TestForgedRecordsFoundAtTermStartHoldTheFleetNoLongerThanTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"), tenantStore("good", "tenant")}
	for _, s := range stores[:2] {
		forgeRecord(t, s, clk.Now())
	}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Timeout, c.Clock = 2, time.Hour, clk }, fakeBinaries{}, stores...)
	f.lead(t) // a new term finds the forged records
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	require.Equal(t, ReasonUpdateQueued, conditionOf(f.live(t, "good", "tenant")).Reason, "the one unit found took the cap")

	clk.Step(time.Hour + time.Second)
	for _, name := range []string{"h0", "h1"} {
		require.NoError(t, f.c.sync(t.Context(), "hostile/"+name))
		f.catchUp(t, "hostile", name)
		assert.Nil(t, f.live(t, "hostile", name).Status.Update, "ended at the update's timeout")
	}
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	assert.NotNil(t, f.live(t, "good", "tenant").Status.Update, "the honest tenant's update started")
}
