package updates

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// Attack: a tenant removes spec.image while its update is recorded (the
// dry run under way). The record stayed for ever, past any timeout: it
// held a place in flight across the fleet, and the tenant's rollout
// (PodsCurrent WaitingForUpdate). Now it ends at the next sync.
func TestAnUpdateWhoseImageIsRemovedEndsAndFreesItsPlace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight, c.Clock = 1, clk }, fakeBinaries{}, tenantsInNamespaces(2)...)
	f.lead(t)
	f.dryRun(t, "ns0", "tenant")
	require.NotNil(t, f.live(t, "ns0", "tenant").Status.Update)

	// The tenant writes its spec: no image.
	obj, err := f.dyn.Tracker().Get(v1.Resource, "ns0", "tenant")
	require.NoError(t, err)
	cleared := obj.(*unstructured.Unstructured).DeepCopy()
	unstructured.RemoveNestedField(cleared.Object, "spec", "image")
	testutil.BumpResourceVersion(cleared)
	require.NoError(t, f.dyn.Tracker().Update(v1.Resource, cleared, "ns0"))
	f.catchUp(t, "ns0", "tenant")

	clk.Step(24 * time.Hour) // the update timeout is a minute
	f.restart(t)
	require.NoError(t, f.c.sync(t.Context(), "ns0/tenant"))
	require.NoError(t, f.c.sync(t.Context(), "ns1/tenant"))
	assert.Nil(t, f.live(t, "ns0", "tenant").Status.Update, "a day past the timeout, the record is gone")
	assert.NotEqual(t, ReasonUpdateQueued, conditionOf(f.live(t, "ns1", "tenant")).Reason,
		"another namespace is not queued behind it: %s", conditionOf(f.live(t, "ns1", "tenant")).Message)
}

// A tenant whose update waits for its own rollout (WaitingForPods) holds
// no place in flight: another namespace starts at MaxInFlight 1.
func TestAnUpdateWaitingForItsPodsHoldsNoFleetPlace(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.MaxInFlight = 1 }, fakeBinaries{}, tenantsInNamespaces(2)...)
	held := statefulSet("tenant-pool-0", "tenant", corev1.Container{Name: "minio", Image: "minio/aistor:old"})
	held.Namespace = "ns0"
	held.Annotations = map[string]string{v1.RolloutAnnotation: ""}
	other := statefulSet("tenant-pool-0", "tenant", corev1.Container{Name: "minio", Image: "minio/aistor:old"})
	other.Namespace = "ns1"
	f.c.cfg.StatefulSets = setsLister(t, held, other)
	f.lead(t)
	for range 3 {
		require.NoError(t, f.c.sync(t.Context(), "ns0/tenant"))
	}
	assert.Equal(t, ReasonWaitingForPods, conditionOf(f.live(t, "ns0", "tenant")).Reason)
	f.dryRun(t, "ns1", "tenant")
	assert.Equal(t, 1, f.admin("ns1", "tenant").dryRunCount())
	require.NoError(t, f.c.sync(t.Context(), "ns0/tenant"))
	assert.Equal(t, ReasonWaitingForPods, conditionOf(f.live(t, "ns0", "tenant")).Reason)
	assert.Zero(t, f.admin("ns0", "tenant").callCount())
}

// A certificate restart begins between the dry run and the real call: the
// real call is not made while the pods are being replaced; the update
// ends, not counted, and starts again (dry run first) after the rollout.
func TestADryRunPassedWhileThePodsAreReplacedIsNotFollowedByTheCall(t *testing.T) {
	a := decide(obs(dryRunRecorded(1, time.Minute, time.Minute), answered(callResult{updated: 4}), func(o *observation) {
		o.sets.replacing = []string{"s-pool-0"}
	}), p)
	assert.Equal(t, report, a.verb, "no call")
	assert.Equal(t, ReasonWaitingForPods, a.reason)
	assert.Nil(t, a.update, "the update ends")
	assert.Empty(t, a.outcome, "not counted")
	assert.Contains(t, a.message, "StatefulSets s-pool-0")
}

// A rollout that waits, here for MinIO's consent (a tenant whose MinIO
// answers 412 whenever a node would go: one node, say), has no pod down:
// the update is not held behind it, and the rollout waits for the update
// instead (rollout TestNoPodIsTakenDownDuringAnInPlaceUpdate). Held behind
// it, neither would ever go.
func TestAnUpdateIsNotHeldBehindARolloutThatWaits(t *testing.T) {
	stores := tenantsInNamespaces(1)
	conditions, _, _ := unstructured.NestedSlice(stores[0].Object, "status", "conditions")
	require.NoError(t, unstructured.SetNestedSlice(stores[0].Object, append(conditions, map[string]any{
		"type": v1.ConditionPodsCurrent, "status": "False", "reason": v1.PodsWaitingForQuorum,
		"message": "pod tenant-pool-0-1 waits: MinIO says no node may go down now", "lastTransitionTime": "2026-11-27T00:00:00Z",
	}), "status", "conditions"))
	f := newFixtureWith(t, func(c *Config) {}, fakeBinaries{}, stores...)
	held := statefulSet("tenant-pool-0", "tenant", corev1.Container{Name: "minio", Image: "minio/aistor:old"})
	held.Namespace = "ns0"
	held.Annotations = map[string]string{v1.RolloutAnnotation: ""}
	f.c.cfg.StatefulSets = setsLister(t, held)
	f.lead(t)
	f.dryRun(t, "ns0", "tenant")
	assert.Equal(t, 1, f.admin("ns0", "tenant").dryRunCount(), "the update started: %+v", conditionOf(f.live(t, "ns0", "tenant")))
	assert.NotEqual(t, ReasonWaitingForPods, conditionOf(f.live(t, "ns0", "tenant")).Reason)
}
