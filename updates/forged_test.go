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

// Attack: a tenant whose MinIO holds an update call open removes
// spec.image and puts it back, again and again. drop ends the record (and
// the fleet's place) but not the call; begin never asks whether a call
// of the key still runs, and the unit's call slot is reentrant for the
// key, so every cycle starts one more call beside the ones still held
// open: OPERATOR_UPDATE_CALLS_PER_NAMESPACE (1) no longer bounds the
// calls one tenant has the operator run at once (each a goroutine and a
// connection for up to OPERATOR_UPDATE_TIMEOUT, each answer read up to
// maxAdminResponse), and MinIO is asked again for the same release while
// the earlier calls are still open. (When the first call ends it frees
// the unit's slot although the others still run.)
func TestTogglingSpecImageNeverStacksUpdateCalls(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.Timeout = time.Hour }, fakeBinaries{}, tenantStore("hostile", "h0"))
	g := &gatedAdmin{fakeAdmin: f.admin("hostile", "h0")}
	dial := f.c.dial
	f.c.dial = func(tn *tenant, host string) (adminAPI, func(), error) {
		if tn.namespace == "hostile" {
			return g, func() {}, nil
		}
		return dial(tn, host)
	}
	f.lead(t)
	ctx := t.Context()
	require.NoError(t, f.c.sync(ctx, "hostile/h0"))
	f.catchUp(t, "hostile", "h0")
	require.Eventually(t, func() bool { _, r, _ := g.counts(); return r == 1 }, 5*time.Second, time.Millisecond)

	for range 5 {
		f.tenantSetsImage(t, "hostile", "h0", "")
		require.NoError(t, f.c.sync(ctx, "hostile/h0"))
		f.tenantSetsImage(t, "hostile", "h0", imgNew)
		require.NoError(t, f.c.sync(ctx, "hostile/h0"))
		f.catchUp(t, "hostile", "h0")
	}
	// Give each cycle's call, if one was started, the time to reach MinIO.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if c, _, _ := g.counts(); c == 6 {
			break
		}
	}
	_, running, peak := g.counts()
	assert.LessOrEqual(t, peak, f.c.cfg.CallsPerNamespace,
		"update calls of one unit running at once (CallsPerNamespace %d); %d still running", f.c.cfg.CallsPerNamespace, running)
}

// Attack: the tenant's MinIO answers the dry run so that reading the
// answer panics (the threat TestAPanicWhileReadingMinIOsAnswerIsThatTenantsAlone
// guards against), then closes its admin port. follow (verify) answers a
// result whose error is untyped with verb retry, before it ever looks at
// the timeout, and retryError consumes that result only while the admin
// API answers: with ServerInfo failing, every sync returns the same
// retry, for ever. status.update stays past any timeout, holding a place
// of OPERATOR_MAX_CONCURRENT_UPDATES across the fleet (and the tenant's
// rollout, WaitingForUpdate). Places taken while nobody waited are kept
// whatever the share: with as many ObjectStores as the cap, one namespace
// stops every in-place update of the fleet, with no status write.
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

// Attack: a tenant allowed to write objectstores/status (docs/security.md
// counts it among tenants: "a namespace admin given aistor.min.io/* has
// it") writes status.update itself, started a year ahead. The fleet
// counts every cached status.update as a place in flight (fleet.recorded),
// and follow measures the timeout from started: a negative elapsed never
// passes it, and a lastCall ahead never calls. One write holds a place of
// OPERATOR_MAX_CONCURRENT_UPDATES for ever; the fleet's share does not
// help (the cap is full before any share is asked), so with the cap's
// number of ObjectStores no other tenant is ever updated.
func TestARecordStartedAheadOfTheClockIsEndedUncounted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"), tenantStore("good", "tenant")}
	ahead := clk.Now().Add(365 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, s := range stores[:2] {
		require.NoError(t, unstructured.SetNestedMap(s.Object, map[string]any{
			"release": relNew, "image": imgNew, "started": ahead, "calls": int64(1), "lastCall": ahead,
		}, "status", "update"))
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

// Attack: a tenant allowed to write objectstores/status forges a record
// of an update in flight, started now, after the leader's term began. A
// record the operator did not write in its term (nor find when the term
// began) takes no place: the cap stays the honest tenants'.
func TestARecordForgedDuringATermTakesNoPlace(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("good", "tenant")}
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 1 }, fakeBinaries{}, stores...)
	f.lead(t)
	obj, err := f.dyn.Tracker().Get(v1.Resource, "hostile", "h0")
	require.NoError(t, err)
	u := obj.(*unstructured.Unstructured).DeepCopy()
	now := time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{
		"release": relNew, "image": imgNew, "started": now, "calls": int64(1), "lastCall": now,
	}, "status", "update"))
	testutil.BumpResourceVersion(u)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, u, "hostile"))
	f.catchUp(t, "hostile", "h0")

	require.NoError(t, f.c.sync(t.Context(), "good/tenant"))
	c := conditionOf(f.live(t, "good", "tenant"))
	assert.NotEqual(t, ReasonUpdateQueued, c.Reason, "the forged record holds the fleet's one place: %s", c.Message)
	assert.NotNil(t, f.live(t, "good", "tenant").Status.Update, "the honest tenant's update started")
}
