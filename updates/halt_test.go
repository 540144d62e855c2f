package updates

import (
	"fmt"
	"strings"
	"testing"

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
// are 1,536. With the record full (32 releases, each failed by the
// budget's namespaces, the longest names Kubernetes allows), the Lease's
// annotation stays within the apiserver's 256 KiB, so the record can
// still be written (before, it grew past it and every later write was
// refused: no release could halt any more).
func TestTheHaltRecordStaysWithinWhatTheAPIServerAccepts(t *testing.T) {
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	h := newHalts(8, kube, "ops", clk, prometheus.NewRegistry())
	hostile := strings.Repeat("<", 300)
	name := strings.Repeat("n", 253)
	for r := range 40 {
		release := fmt.Sprintf("RELEASE.2026-%02d-%02dT10-00-00Z", r/28+1, r%28+1)
		for n := range 8 {
			ns := fmt.Sprintf("%s%02d", strings.Repeat("x", 61), n)
			_, _, err := h.fail(t.Context(), ns+"/"+name, release, CauseInPlaceRefused, hostile)
			require.NoError(t, err)
			clk.Step(1)
		}
	}
	lease, err := kube.CoordinationV1().Leases("ops").Get(t.Context(), HaltRecordName, metav1.GetOptions{})
	require.NoError(t, err)
	size := 0
	for k, v := range lease.Annotations {
		size += len(k) + len(v)
	}
	assert.LessOrEqual(t, size, maxAnnotationBytes)
	st, err := h.state(t.Context(), "RELEASE.2026-02-12T10-00-00Z")
	require.NoError(t, err)
	assert.True(t, st.halted, "the latest release, halted, is kept")
}
