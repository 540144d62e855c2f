package updates

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
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
	// The plain object tracker: NewClientset's field-managed one builds a
	// REST mapper on every update, half this test's time over its 160
	// writes of a 190 KiB annotation, and nothing here is server-side
	// applied.
	kube := fake.NewSimpleClientset()

	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(8, kube, "ops", clk, prometheus.NewRegistry())
	hostile := strings.Repeat("<", 300)
	name := strings.Repeat("n", 253)
	for r := range 20 {
		release := fmt.Sprintf("RELEASE.2026-01-%02dT10-00-00Z", r+1)
		for n := range 8 {
			ns := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), n)
			_, _, err := h.fail(t.Context(), ns+"/"+name, release, CauseInPlaceRefused, hostile)
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
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(3, kube, "ops", clk, prometheus.NewRegistry())
	const bad = "RELEASE.2026-03-01T10-00-00Z"
	for _, key := range []string{"a/tenant", "b/tenant"} {
		_, _, err := h.fail(t.Context(), key, bad, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		clk.Step(time.Second)
	}
	for r := range 40 {
		release := fmt.Sprintf("RELEASE.2025-%02d-%02dT10-00-00Z", r/28+1, r%28+1)
		_, _, err := h.fail(t.Context(), "hostile/h", release, CauseInPlaceRefused, "refused")
		require.NoError(t, err)
		clk.Step(time.Second)
	}
	halted, _, err := h.fail(t.Context(), "c/tenant", bad, CauseInPlaceRefused, "refused")
	require.NoError(t, err)
	assert.True(t, halted, "three namespaces failed the release")
}
