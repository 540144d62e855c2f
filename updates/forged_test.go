package updates

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// gatedAdmin is a tenant's MinIO whose update calls answer only when
// their context ends, and which counts how many of them are being
// answered at once.
type gatedAdmin struct {
	*fakeAdmin
	mu            sync.Mutex
	gates         []chan struct{}
	running, peak int
}

func (g *gatedAdmin) ServerUpdateV2(ctx context.Context, opts madmin.ServerUpdateOpts) (madmin.ServerUpdateStatusV2, error) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.gates = append(g.gates, gate)
	g.running++
	g.peak = max(g.peak, g.running)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
	}()
	select {
	case <-gate:
	case <-ctx.Done():
		return madmin.ServerUpdateStatusV2{}, ctx.Err()
	}
	return g.fakeAdmin.ServerUpdateV2(ctx, opts)
}

// holdFirstCall has hostile/h0's MinIO hold its update calls open until
// answered, begins a term and starts hostile/h0's update: its dry run is
// recorded, and its call open.
func (f *fixture) holdFirstCall(t *testing.T) *gatedAdmin {
	t.Helper()
	g := &gatedAdmin{fakeAdmin: f.admin("hostile", "h0")}
	dial := f.c.dial
	f.c.dial = func(tn *tenant, host string) (adminAPI, func(), error) {
		if tn.namespace == "hostile" {
			return g, func() {}, nil
		}
		return dial(tn, host)
	}
	f.lead(t)
	require.NoError(t, f.c.sync(t.Context(), "hostile/h0"))
	f.catchUp(t, "hostile", "h0")
	require.Eventually(t, func() bool { _, r, _ := g.counts(); return r == 1 }, 5*time.Second, time.Millisecond)
	return g
}

// answer lets every call made so far through.
func (g *gatedAdmin) answer() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gate := range g.gates {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}
}

func (g *gatedAdmin) counts() (calls, running, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.gates), g.running, g.peak
}

// tenantSetsImage has the tenant write its ObjectStore's spec.image (removed
// when image is "") and the cache catch up.
func (f *fixture) tenantSetsImage(t *testing.T, ns, name, image string) {
	t.Helper()
	obj, err := f.dyn.Tracker().Get(v1.Resource, ns, name)
	require.NoError(t, err)
	u := obj.(*unstructured.Unstructured).DeepCopy()
	if image == "" {
		unstructured.RemoveNestedField(u.Object, "spec", "image")
	} else {
		require.NoError(t, unstructured.SetNestedField(u.Object, image, "spec", "image"))
	}
	testutil.BumpResourceVersion(u)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, u, ns))
	f.catchUp(t, ns, name)
}

// A tenant whose MinIO holds an update call open removes spec.image and
// puts it back, again and again. Removing it ends the record (and the
// fleet's place), not the call; were a new update started beside it,
// every cycle would stack one more call (a goroutine and a connection for
// up to OPERATOR_UPDATE_TIMEOUT) past the unit's call slots
// (OPERATOR_UPDATE_CALLS_PER_NAMESPACE). Nothing starts until the open
// call ends; then the update starts afresh, one call at a time.
func TestTogglingSpecImageNeverStacksUpdateCalls(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.Timeout = time.Hour }, fakeBinaries{}, tenantStore("hostile", "h0"))
	g := f.holdFirstCall(t)
	ctx := t.Context()

	for range 5 {
		f.tenantSetsImage(t, "hostile", "h0", "")
		require.NoError(t, f.c.sync(ctx, "hostile/h0"))
		f.tenantSetsImage(t, "hostile", "h0", imgNew)
		require.NoError(t, f.c.sync(ctx, "hostile/h0"))
		f.catchUp(t, "hostile", "h0")
	}
	// A call is recorded before it is made: no record, no call.
	st := f.live(t, "hostile", "h0")
	assert.Nil(t, st.Status.Update, "no update started beside the open call")
	assert.Contains(t, conditionOf(st).Message, "waiting for MinIO to answer an update call made before spec.image last changed")
	calls, _, _ := g.counts()
	assert.Equal(t, 1, calls)

	g.answer()
	require.Eventually(t, func() bool { return !f.c.calls.state("hostile/h0").running }, 5*time.Second, time.Millisecond)
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	assert.NotNil(t, f.live(t, "hostile", "h0").Status.Update, "the update starts afresh once the call ended")
	require.Eventually(t, func() bool { c, _, _ := g.counts(); return c == 2 }, 5*time.Second, time.Millisecond)
	_, _, peak := g.counts()
	assert.Equal(t, 1, peak, "one call at a time")
}

// The tenant's MinIO answers the dry run so that reading the answer
// panics (the threat TestAPanicWhileReadingMinIOsAnswerIsThatTenantsAlone
// guards against), then closes its admin port. The panic is handed to the
// worker once; kept, it was decided on at every sync before the update's
// timeout was looked at, and the record, with its place of
// OPERATOR_MAX_CONCURRENT_UPDATES across the fleet, stayed for ever: with
// as many ObjectStores as the cap, one namespace stopped every in-place
// update of the fleet.
func TestAPanickedAnswerThenSilenceEndsAtTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"), tenantStore("good", "tenant")}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Clock = 2, clk }, fakeBinaries{}, stores...)
	f.lead(t)
	for _, name := range []string{"h0", "h1"} {
		f.admin("hostile", name).panics = true
		f.dryRun(t, "hostile", name)
		require.NotNil(t, f.live(t, "hostile", name).Status.Update)
		// The tenant closes its admin API.
		delete(f.admins, name+"-hl.hostile.svc.cluster.local:9000")
	}
	clk.Step(24 * time.Hour) // the update timeout is a minute
	for range 3 {
		for _, name := range []string{"h0", "h1"} {
			t.Log(f.c.sync(t.Context(), "hostile/"+name))
			f.catchUp(t, "hostile", name)
		}
	}
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	assert.Nil(t, f.live(t, "hostile", "h0").Status.Update, "a day past the update's timeout, the record is still there")
	assert.NotEqual(t, ReasonUpdateQueued, conditionOf(f.live(t, "good", "tenant")).Reason,
		"another namespace waits for it, its share notwithstanding: %s", conditionOf(f.live(t, "good", "tenant")).Message)
}

// A tenant allowed to write objectstores/status (docs/security.md counts
// it among tenants: "a namespace admin given aistor.min.io/* has it")
// writes status.update itself, started a year ahead, before a leader's
// term begins. Found then, the record is counted within the unit's share,
// but the operator stamps a start from its own clock: one ahead of it is
// not its record, and is ended, nothing counted. Followed instead, it
// would never time out, and hold its place for ever.
func TestARecordStartedAheadOfTheClockIsEndedUncounted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"), tenantStore("good", "tenant")}
	for _, s := range stores[:2] {
		forgeRecord(t, s, clk.Now().Add(365*24*time.Hour))
	}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Clock = 2, clk }, fakeBinaries{}, stores...)
	f.lead(t)
	clk.Step(24 * time.Hour) // the update timeout is a minute
	for _, name := range []string{"h0", "h1"} {
		require.NoError(t, f.c.sync(t.Context(), "hostile/"+name))
		f.catchUp(t, "hostile", name)
	}
	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	assert.Nil(t, f.live(t, "hostile", "h0").Status.Update, "a day on, the forged record is still followed")
	assert.NotEqual(t, ReasonUpdateQueued, conditionOf(f.live(t, "good", "tenant")).Reason,
		"another namespace waits for it, its share notwithstanding: %s", conditionOf(f.live(t, "good", "tenant")).Message)
}

// A tenant allowed to write objectstores/status forges a record of an
// update in flight, started now, after the leader's term began. A record
// the operator did not write in its term (nor find when the term began)
// takes no place: the cap stays the honest tenants'.
func TestARecordForgedDuringATermTakesNoPlace(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("good", "tenant")}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 1 }, fakeBinaries{}, stores...)
	f.lead(t)
	obj, err := f.dyn.Tracker().Get(v1.Resource, "hostile", "h0")
	require.NoError(t, err)
	u := obj.(*unstructured.Unstructured).DeepCopy()
	forgeRecord(t, u, time.Now())
	testutil.BumpResourceVersion(u)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, u, "hostile"))
	f.catchUp(t, "hostile", "h0")

	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	c := conditionOf(f.live(t, "good", "tenant"))
	assert.NotEqual(t, ReasonUpdateQueued, c.Reason, "the forged record holds the fleet's one place: %s", c.Message)
	assert.NotNil(t, f.live(t, "good", "tenant").Status.Update, "the honest tenant's update started")
}

// forgeRecord writes into u's status an update in flight, called once,
// started at started, as a tenant with objectstores/status could.
func forgeRecord(t *testing.T, u *unstructured.Unstructured, started time.Time) {
	t.Helper()
	at := started.UTC().Format(time.RFC3339)
	require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{
		"release": relNew, "image": imgNew, "started": at, "calls": int64(1), "lastCall": at,
	}, "status", "update"))
}
