package updates

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAnAPIErrorFindingThePodsEndpointDoesNotTakeItDown: a Service of
// nine slices with minio-pool-1-0 in the ninth. The second List, or the
// read of the Pod, fails with the 503 the apiserver gives while etcd
// changes leader. That is the operator's own hiccup, no MinIO it cannot
// ask: the pod waits (ErrNotNow), and would be asked again, rather than
// go on readiness alone while its own node says 412. (A hostile review
// found it taken down.)
func TestAnAPIErrorFindingThePodsEndpointDoesNotTakeItDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(cs *fake.Clientset)
	}{
		{"second page of EndpointSlices", func(cs *fake.Clientset) { pagedSlices(cs, 2) }},
		{"the Pod", func(cs *fake.Clientset) {
			pagedSlices(cs, 0)
			cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := pool1InTheNinthSlice()
			n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
			tn, cs := tenantAt(t, n, "http://minio.t.svc.cluster.local", objs...)
			tc.fail(cs)

			_, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
			rolloutDeletes := !errors.Is(err, ErrNotNow) // rollout/controller.go replace: nil or any other error takes the pod down
			assert.False(t, rolloutDeletes,
				"minio-pool-1-0's own node says 412; the operator failed to read the API (dialled %v), and the rollout would delete it: %v", n.asked, err)
		})
	}
}
