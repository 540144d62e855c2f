package updates

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// minioHL is MinIO's own headless Service over every pool of tenant
// (selector v1.min.io/tenant, publishNotReadyAddresses, as MinIO's
// operator and chart write <tenant>-hl), with its pods Ready.
func minioHL(listed ...string) []runtime.Object {
	labels := map[string]string{"v1.min.io/tenant": "tenant"}
	svc := tService("tenant-hl", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Selector = labels
		s.Spec.PublishNotReadyAddresses = true
	})
	ips := map[string]string{"minio-pool-0-0": "10.0.0.5", "minio-pool-1-0": "10.0.0.6"}
	slice := tSlice("tenant-hl", "tenant-hl-x7k2p", 9000)
	for _, p := range listed {
		slice.Endpoints = append(slice.Endpoints, tEndpoint(ips[p], p, "t", p, true))
	}
	objs := []runtime.Object{svc, slice}
	for _, name := range []string{"minio-pool-0-0", "minio-pool-1-0"} {
		p := tPod("t", name, ips[name], labels)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		objs = append(objs, p)
	}
	return objs
}

// TestAPodTheServiceSelectsButDoesNotListYetWaits: the default endpoint,
// <name>-hl, selects every pool. minio-pool-1-0 is Ready, carries the
// Service's selector labels, and the endpointslice controller has not
// listed it yet. The Service does lead to it, later: it waits, and pool
// 0's node is never asked about it (it would say 200 while the pod's own
// node says 412).
func TestAPodTheServiceSelectsButDoesNotListYetWaits(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn, _ := tenantAt(t, n, "http://tenant-hl.t.svc.cluster.local:9000", minioHL("minio-pool-0-0")...)

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	assert.True(t, errors.Is(err, ErrNotNow),
		"minio-pool-1-0's own node says 412 and the Service selects it (its slice lags); approved by %v instead (err %v, asked %q)", n.asked, err, asked)
	assert.NotContains(t, n.asked, "10.0.0.5:9000", "pool 0's node was asked about pool 1's pod")
}
