package updates

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestAWaitMinIODidNotAnswerDoesNotQuoteIt: minio-pool-1-0 is listed as
// not ready yet; the operator waits without dialling anything, and the
// wait, which the rollout's condition quotes, does not say MinIO said no.
func TestAWaitMinIODidNotAnswerDoesNotQuoteIt(t *testing.T) {
	objs := twoPools("minio-pool-0-0")
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			s.Endpoints = append(s.Endpoints, tEndpoint("10.0.0.6", "", "t", "minio-pool-1-0", false))
		}
		if p, ok := o.(*corev1.Pod); ok {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
	}
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn := twoPoolTenant(t, n, objs...)

	_, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.True(t, errors.Is(err, ErrNotNow), "it waits: %v", err)
	require.Empty(t, n.asked, "no node was dialled")
	assert.NotContains(t, err.Error(), "MinIO says",
		"nothing was dialled (%v), yet the wait is worded as MinIO's answer", n.asked)
}
