package updates

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/object-store-operator/operator/internal/testutil"
)

// maxAnnotationBytes is the apiserver's limit on an object's annotations
// together: a Lease written beyond it is refused.
const maxAnnotationBytes = 256 * 1024

// TestTheHaltRecordStaysWithinWhatTheAPIServerAccepts: tenants' MinIO
// words their refusals as they like; escaped as JSON, 256 bytes of "<"
// are 1,536. With the record full (twenty releases, each failed by the
// budget's namespaces, the longest names Kubernetes allows: about 300 KiB
// if none were evicted, and a dozen fill it), the Lease's annotation
// stays within the apiserver's 256 KiB, so the record can still be
// written (before, it grew past it and every later write was refused: no
// release could halt any more).
func TestTheHaltRecordStaysWithinWhatTheAPIServerAccepts(t *testing.T) {
	// Its own record, client and clock: it runs beside the others.
	t.Parallel()
	// The plain object tracker: NewClientset's field-managed one builds a
	// REST mapper on every update, half this test's time over its 160
	// writes of a 190 KiB annotation, and nothing here is server-side
	// applied.
	kube := testutil.Clientset()

	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(8, kube, "ops", clk, prometheus.NewRegistry())
	hostile := strings.Repeat("<", 300)
	name := strings.Repeat("n", 253)
	for r := range 20 {
		release := fmt.Sprintf("RELEASE.2026-01-%02dT10-00-00Z", r+1)
		for n := range 8 {
			ns := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), n)
			_, _, err := h.fail(t.Context(), ns+"/"+name, ns, release, CauseInPlaceRefused, hostile)
			require.NoError(t, err)
			clk.Step(time.Second)
		}
	}
	lease, err := kube.CoordinationV1().Leases("ops").Get(t.Context(), HaltRecordName, metav1.GetOptions{})
	require.NoError(t, err)
	size := 0
	for k, v := range lease.Annotations {
		size += len(k) + len(v)
	}
	assert.LessOrEqual(t, size, maxAnnotationBytes)
	st, err := h.state(t.Context(), "RELEASE.2026-01-20T10-00-00Z")
	require.NoError(t, err)
	assert.True(t, st.halted, "the latest release, halted, is kept")
}

// TestOneNamespaceCannotEvictOthersFailuresFromTheHaltRecord: two
// namespaces failed a release; a hostile tenant then fails forty other
// releases (it picks its image and what its MinIO answers). Before, each
// of its failures took a place in the record, and the least recently
// touched release, the one failing for the others, was evicted: its
// failures forgotten, the third namespace's failure did not halt it.
func TestOneNamespaceCannotEvictOthersFailuresFromTheHaltRecord(t *testing.T) {
	// Its own record, client and clock: it runs beside the others.
	t.Parallel()
	kube := testutil.Clientset()
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(3, kube, "ops", clk, prometheus.NewRegistry())
	const bad = "RELEASE.2026-03-01T10-00-00Z"
	for _, key := range []string{"a/tenant", "b/tenant"} {
		_, _, err := h.fail(t.Context(), key, unitOf(nil, key), bad, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		clk.Step(time.Second)
	}
	for r := range 40 {
		release := fmt.Sprintf("RELEASE.2025-%02d-%02dT10-00-00Z", r/28+1, r%28+1)
		_, _, err := h.fail(t.Context(), "hostile/h", "hostile", release, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		clk.Step(time.Second)
	}
	halted, _, err := h.fail(t.Context(), "c/tenant", "c", bad, CauseInPlaceRefused, "refused")
	require.NoError(t, err)
	assert.True(t, halted, "three namespaces failed the release")
}

// TestOneReleaseFailingInEveryUnitFitsTheHaltRecord: with each
// ObjectStore its own unit, a failure names its unit (the key again) and
// successes name theirs. At the largest budget, with the longest keys
// Kubernetes allows and MinIO's words escaped six-fold, a release that
// budget-1 units proved and budget units then failed still fits the
// record: it halts and is kept, not evicted to fit.
func TestOneReleaseFailingInEveryUnitFitsTheHaltRecord(t *testing.T) {
	// Its own record, client and clock: it runs beside the others.
	t.Parallel()
	kube := testutil.Clientset()
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(MaxFailureBudget, kube, "ops", clk, prometheus.NewRegistry())
	const release = "RELEASE.2026-03-01T10-00-00Z"
	key := func(prefix string, n int) string {
		return fmt.Sprintf("%s%s%02d/%s", prefix, strings.Repeat("x", 60), n, strings.Repeat("n", 253))
	}
	for n := range MaxFailureBudget - 1 {
		require.NoError(t, h.succeed(t.Context(), key("s", n), key("s", n), release))
		clk.Step(time.Second)
	}
	var halted bool
	for n := range MaxFailureBudget {
		var err error
		halted, _, err = h.fail(t.Context(), key("f", n), key("f", n), release, CauseInPlaceRefused, strings.Repeat("<", 300))
		require.NoError(t, err)
		clk.Step(time.Second)
	}
	assert.True(t, halted)
	lease, err := kube.CoordinationV1().Leases("ops").Get(t.Context(), HaltRecordName, metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("one release's entry: %d bytes", len(lease.Annotations[haltAnnotation]))
	assert.LessOrEqual(t, len(lease.Annotations[haltAnnotation]), maxHaltBytes)
	st, err := h.state(t.Context(), release)
	require.NoError(t, err)
	assert.True(t, st.halted)
	assert.Len(t, st.failedUnits, MaxFailureBudget)
}

// TestAHaltRecordOfThePreviousVersionReadsAsItWas: before units, a
// failure named only its ObjectStore and successes their namespace. Such
// a record counts per namespace as it did; a record written per namespace
// keeps that format (no unit named), so the previous version reads it
// too; and with a tenant label, the same ObjectStore's failure replaces
// its namespace's old one instead of counting twice.
func TestAHaltRecordOfThePreviousVersionReadsAsItWas(t *testing.T) {
	const release = "RELEASE.2026-03-01T10-00-00Z"
	previous := `{"` + release + `":{"failures":[` +
		`{"objectStore":"a/x","cause":"InPlaceRefused","message":"refused","at":"2026-03-01T10:00:00Z"},` +
		`{"objectStore":"b/y","cause":"InPlaceRefused","message":"refused","at":"2026-03-01T10:00:01Z"}],"succeeded":["c"]}}`
	setup := func(t *testing.T) (*halts, *fake.Clientset) {
		kube := testutil.Clientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: HaltRecordName, Namespace: "ops",
			Annotations: map[string]string{haltAnnotation: previous}}})
		return newHalts(3, kube, "ops", clocktesting.NewFakeClock(metav1.Now().Time), prometheus.NewRegistry()), kube
	}

	t.Run("namespace units", func(t *testing.T) {
		h, kube := setup(t)
		st, err := h.state(t.Context(), release)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, st.failedUnits)
		halted, _, err := h.fail(t.Context(), "a/other", "a", release, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		assert.False(t, halted, "namespace a counts once")
		halted, _, err = h.fail(t.Context(), "c/z", "c", release, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		assert.True(t, halted, "a third namespace, whose success the previous version recorded, fails")
		lease, err := kube.CoordinationV1().Leases("ops").Get(t.Context(), HaltRecordName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, lease.Annotations[haltAnnotation], `"unit"`, "the previous version's format")
	})
	t.Run("tenant units", func(t *testing.T) {
		h, _ := setup(t)
		halted, st, err := h.fail(t.Context(), "a/x", "tenant:t", release, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		assert.False(t, halted, "a/x's failure replaces its own, counted per namespace before")
		assert.ElementsMatch(t, []string{"b", "tenant:t"}, st.failedUnits)
	})
}
