package updates

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ownEndpoint: spec.updates.endpoint names minio-pool-1-0 itself under
// MinIO's headless Service (<pod>.<svc>.<ns>.svc, which the namespace
// rule allows and docs/updates.md offers).
const ownEndpoint = "http://minio-pool-1-0.tenant-hl.t.svc.cluster.local:9000"

// TestAnEndpointNamingThePodItselfIsAnsweredByItsOwnPod: the Service
// lists two endpoints of hostname minio-pool-1-0 (a second Pod of the
// tenant's with spec.hostname minio-pool-1-0 and spec.subdomain
// tenant-hl, which the endpointslice controller lists under that
// hostname, or a slice written beside the controller's). resolve picks by
// hostname and by Pod, as through the Service: only minio-pool-1-0's own
// node (10.0.0.6) is asked, and its 412 is heeded. (A hostile review
// found the other Pod's 200 taken as the pod's own node's.)
func TestAnEndpointNamingThePodItselfIsAnsweredByItsOwnPod(t *testing.T) {
	objs := minioHL("minio-pool-0-0", "minio-pool-1-0")
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			// minio-pool-0-0's Pod listed under hostname minio-pool-1-0,
			// first in the slice.
			s.Endpoints = append([]discoveryv1.Endpoint{tEndpoint("10.0.0.5", "minio-pool-1-0", "t", "minio-pool-0-0", true)}, s.Endpoints...)
		}
	}
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn, _ := tenantAt(t, n, ownEndpoint, objs...)

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	approvedAsItsOwn := err == nil && asked == ""
	assert.False(t, approvedAsItsOwn,
		"minio-pool-1-0's own node says 412; it is approved by Pod minio-pool-0-0's node (dialled %v) and reported as its own node's answer", n.asked)
}

// TestAnEndpointNamingThePodUnderAServiceThatListsItWithoutThatHostnameDoesNotWaitForEver:
// spec.updates.endpoint names minio-pool-1-0 under the Service minio,
// which selects every MinIO pod but is not the StatefulSet's serviceName.
// The endpointslice controller sets an endpoint's hostname only for the
// Service that is the Pod's spec.subdomain, so <pod>.minio.t.svc leads
// nowhere, now or later: MinIO cannot be asked there (readiness alone),
// and the pod does not wait for ever for a listing it already has. (A
// hostile review found it waiting.)
func TestAnEndpointNamingThePodUnderAServiceThatListsItWithoutThatHostnameDoesNotWaitForEver(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})

	// The same slices, through the Service: the pod's own node is asked.
	through := twoPoolTenant(t, n, twoPools("minio-pool-0-0", "minio-pool-1-0")...)
	_, err := through.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.True(t, errors.Is(err, ErrNotNow))
	require.Equal(t, []string{"10.0.0.6:9000"}, n.asked, "through the Service the pod's own node answers")

	n.asked = nil
	own, _ := tenantAt(t, n, "http://minio-pool-1-0.minio.t.svc.cluster.local:9000", twoPools("minio-pool-0-0", "minio-pool-1-0")...)
	for range 3 { // the rollout asks again every QuorumPoll; nothing changes
		asked, err := own.mayTakeDown(t.Context(), "minio-pool-1-0")
		waitsUnasked := errors.Is(err, ErrNotNow) && len(n.asked) == 0
		assert.False(t, waitsUnasked,
			"the Service lists minio-pool-1-0 ready (without hostname, as for any Service not its subdomain); the pod waits unasked, for ever: %v (asked %q)", err, asked)
	}
}
