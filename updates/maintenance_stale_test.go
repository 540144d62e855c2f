package updates

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAnEndpointOfAnEarlierPodWaits: minio-pool-1-0 was recreated (new
// UID, new address 10.0.0.6) and is Ready; the Service's slice still
// lists its earlier Pod (uid "old", 10.0.0.7), ready as a
// publishNotReadyAddresses Service keeps it. The slice lags the Pod: the
// pod waits as for a 412, rather than go on readiness alone as if MinIO
// could not be asked. Nothing is dialled. The same holds with the
// endpoint naming the pod itself.
func TestAnEndpointOfAnEarlierPodWaits(t *testing.T) {
	for _, endpoint := range []string{"http://tenant-hl.t.svc.cluster.local:9000", ownEndpoint} {
		t.Run(endpoint, func(t *testing.T) { earlierPodWaits(t, endpoint) })
	}
}

func earlierPodWaits(t *testing.T, endpoint string) {
	objs := minioHL("minio-pool-0-0")
	for _, o := range objs {
		switch o := o.(type) {
		case *discoveryv1.EndpointSlice:
			ep := tEndpoint("10.0.0.7", "minio-pool-1-0", "t", "minio-pool-1-0", true)
			ep.TargetRef.UID = "old"
			o.Endpoints = append(o.Endpoints, ep)
		case *corev1.Pod:
			o.UID = types.UID("new-" + o.Name)
		}
	}
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn, _ := tenantAt(t, n, endpoint, objs...)

	_, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
	assert.False(t, rolloutDeletes,
		"minio-pool-1-0's own node says 412, its slice lags the Pod, and no node was asked (dialled %v); the rollout would delete it: %v", n.asked, err)
}
