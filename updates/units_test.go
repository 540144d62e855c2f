package updates

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// labelledTenant is UnitOf as tenant.Resolver.Unit answers it when the
// platform's tenant label puts namespaces into one tenant: the
// namespaces named are "tenant:<value>", every other namespace its own.
func labelledTenant(value string, namespaces ...string) func(string) string {
	return func(key string) string {
		ns, _, _ := strings.Cut(key, "/")
		for _, n := range namespaces {
			if n == ns {
				return "tenant:" + value
			}
		}
		return ns
	}
}

// perObjectStore is UnitOf with OPERATOR_SHARE_UNIT=objectstore.
func perObjectStore(key string) string { return key }

// TestNamespacesOfOneLabelledTenantCountOnceAgainstTheBudget: one party
// with three namespaces (issue 29) fails a new release in each of them on
// purpose. Counted per namespace, that was the budget: the release halted
// for everyone and the honest tenant was never called. With the
// platform's tenant label naming the three one tenant, they count once:
// the honest namespace is called and the release is not halted.
func TestNamespacesOfOneLabelledTenantCountOnceAgainstTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unitOf func(string) string
		halted bool
	}{
		{"one labelled tenant", labelledTenant("mallory", "m0", "m1", "m2"), false},
		// Namespace units (no tenant label): three namespaces are three
		// parties, and spend the budget.
		{"namespace units", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores := []*unstructured.Unstructured{tenantStore("m0", "s"), tenantStore("m1", "s"), tenantStore("m2", "s"), tenantStore("honest", "tenant")}
			f, _, _ := haltFixtureWith(t, func(c *Config) { c.UnitOf = tc.unitOf }, stores...)
			f.admin("honest", "tenant").refuse = false
			for i := range 3 {
				f.update(t, fmt.Sprintf("m%d", i), "s")
				require.Equal(t, ReasonRollingUpdate, conditionOf(f.live(t, fmt.Sprintf("m%d", i), "s")).Reason, "m%d failed", i)
			}
			require.NoError(t, f.c.sync(t.Context(), "honest/tenant"))
			f.waitCallDone(t, "honest/tenant")
			st, err := f.c.halts.state(t.Context(), relNew)
			require.NoError(t, err)
			c := conditionOf(f.live(t, "honest", "tenant"))
			if tc.halted {
				assert.True(t, st.halted)
				assert.Equal(t, 0, f.admin("honest", "tenant").callCount(), "halted before the honest tenant was called")
				assert.Equal(t, ReasonUpdatesHalted, c.Reason)
				return
			}
			assert.False(t, st.halted, "one tenant's failures count once")
			assert.Equal(t, 1, st.failed)
			assert.Equal(t, 1, f.admin("honest", "tenant").callCount(), "the honest tenant is called")
			assert.Equal(t, ReasonUpdatingInPlace, c.Reason)
		})
	}
}

// TestAFleetInOneNamespaceHaltsWithObjectStoreUnits: six ObjectStores
// one team runs in one namespace, every MinIO refusing the update. With
// namespace units the namespace counts once: all six were called and
// rolled and the release never halted (measured with six real MinIO
// tenants, issue 29; TestOneNamespaceCannotHaltTheFleet keeps that the
// default). With OPERATOR_SHARE_UNIT=objectstore each ObjectStore
// counts: the budget's three are called, fail, the release halts, and
// the other three are never called.
func TestAFleetInOneNamespaceHaltsWithObjectStoreUnits(t *testing.T) {
	var stores []*unstructured.Unstructured
	for i := range 6 {
		stores = append(stores, tenantStore("fleet", fmt.Sprintf("s%d", i)))
	}
	f, _, _ := haltFixtureWith(t, func(c *Config) { c.UnitOf = perObjectStore }, stores...)
	for round := 0; round < 3; round++ {
		for i := range 6 {
			name := fmt.Sprintf("s%d", i)
			f.catchUp(t, "fleet", name)
			require.NoError(t, f.c.sync(t.Context(), "fleet/"+name))
			f.waitCallDone(t, "fleet/"+name)
		}
	}
	assert.Equal(t, 3, f.calledCount(), "the budget's three ObjectStores only")
	st, err := f.c.halts.state(t.Context(), relNew)
	require.NoError(t, err)
	assert.True(t, st.halted)
	halted := 0
	for i := range 6 {
		name := fmt.Sprintf("s%d", i)
		if f.admin("fleet", name).callCount() == 0 {
			c := conditionOf(f.live(t, "fleet", name))
			assert.Equal(t, ReasonUpdatesHalted, c.Reason)
			assert.Contains(t, c.Message, "failed in 3 ObjectStores (InPlaceRefused; this namespace's: fleet/s0 (InPlaceRefused")
			halted++
		}
	}
	assert.Equal(t, 3, halted, "the three never called say why")
}

// TestNamespacesOfOneLabelledTenantShareItsCallSlots: two namespaces of
// one labelled tenant whose MinIO never answers the update call hold
// OPERATOR_UPDATE_CALLS_PER_NAMESPACE (1) call between them, not one
// each; another tenant is called at once.
func TestNamespacesOfOneLabelledTenantShareItsCallSlots(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("m0", "s"), tenantStore("m1", "s"), tenantStore("other", "tenant")}
	f := newFixtureWith(t, func(c *Config) { c.UnitOf = labelledTenant("mallory", "m0", "m1") }, fakeBinaries{}, stores...)
	f.admin("m0", "s").hang = true
	f.admin("m1", "s").hang = true
	f.lead(t)
	require.NoError(t, f.c.sync(t.Context(), "m0/s"))
	require.True(t, f.c.calls.state("m0/s").running)
	require.NoError(t, f.c.sync(t.Context(), "m1/s"))
	assert.False(t, f.c.calls.state("m1/s").running, "the tenant's one call slot is taken by its other namespace")
	st := f.live(t, "m1", "s")
	assert.Nil(t, st.Status.Update, "nothing recorded, nothing called")
	c := conditionOf(st)
	assert.Equal(t, ReasonUpdateQueued, c.Reason)
	assert.Contains(t, c.Message, "tenant mallory has 1 update call(s) running")
	require.NoError(t, f.c.sync(t.Context(), "other/tenant"))
	f.waitCallDone(t, "other/tenant")
	assert.Equal(t, 1, f.admin("other", "tenant").callCount(), "another tenant is called at once")
	assert.Equal(t, 0, f.admin("m1", "s").callCount())
}

// TestUnitsAreWordedAsTheirTenantsKnowThem: a condition says whose slot
// or share it waits for, and counts failures in the units' own word; the
// default (namespaces) reads as it always has.
func TestUnitsAreWordedAsTheirTenantsKnowThem(t *testing.T) {
	assert.Equal(t, "namespace t", unitName("t"))
	assert.Equal(t, "tenant acme", unitName("tenant:acme"))
	assert.Equal(t, "ObjectStore t/s", unitName("t/s"))
	assert.Equal(t, "3 namespaces", countUnits(3, "a", "b", "c"))
	assert.Equal(t, "3 ObjectStores", countUnits(3, "t/a", "t/b", "t/c"))
	assert.Equal(t, "3 tenants", countUnits(3, "tenant:x", "b", "c"), "a namespace without the label is its own tenant")
	assert.Equal(t, "t", unitOf(nil, "t/s"))
	assert.Equal(t, "t", unitOf(func(string) string { return "" }, "t/s"), "no answer: the namespace")
}
