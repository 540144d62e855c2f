package updates

// The maintenance check asks the pod's own node, through the Service as
// its EndpointSlices lead to it. Each test here failed on b78dbd9, the
// check's first version (a hostile review).

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// headlessOverTwoPools: the tenant's headless Service minio-hl over both pools,
// its endpoints named by the pods' hostnames (StatefulSet pods).
func headlessOverTwoPools() []runtime.Object {
	svc := tService("minio-hl", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Selector = map[string]string{"app": "minio"}
	})
	labels := map[string]string{"app": "minio"}
	slice := tSlice("minio-hl", "minio-hl-1", 9000,
		tEndpoint("10.0.0.5", "minio-pool-0-0", "t", "minio-pool-0-0", true),
		tEndpoint("10.0.0.6", "minio-pool-1-0", "t", "minio-pool-1-0", true))
	return []runtime.Object{svc, slice, tPod("t", "minio-pool-0-0", "10.0.0.5", labels), tPod("t", "minio-pool-1-0", "10.0.0.6", labels)}
}

// TestAnEndpointNamingANodeIsSaidToAnswerForIt: with
// spec.updates.endpoint a pod's hostname (<pod>.<svc>.<ns>.svc, which the
// namespace rule allows and docs/updates.md offers), every pod is asked
// about through that one pod's node, and the answer says so: a 200 comes
// with `asked` naming the endpoint, and a 412 does not claim the pod's
// own node answered.
func TestAnEndpointNamingANodeIsSaidToAnswerForIt(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn, _ := tenantAt(t, n, "http://minio-pool-0-0.minio-hl.t.svc.cluster.local:9000", headlessOverTwoPools()...)

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	approvedSilently := err == nil && asked == ""
	assert.False(t, approvedSilently,
		"minio-pool-1-0's own node says 412, yet it is approved by minio-pool-0-0's node with no word of it (dialled %v)", n.asked)

	// The other way round: the endpoint's node refuses, and the message
	// names the wrong node.
	n2 := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusPreconditionFailed, "10.0.0.6:9000": http.StatusOK})
	tn.dial = n2.dial
	asked, err = tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.Error(t, err)
	if !slices.Contains(n2.asked, "10.0.0.6:9000") {
		assert.NotContains(t, err.Error()+asked, "pod minio-pool-1-0's node",
			"only %v was dialled (minio-pool-0-0), yet the message says pod minio-pool-1-0's node answered", n2.asked)
	}
}

// TestAPlatformEndpointIsSaidToBeAskedAsWritten: an endpoint the
// platform allows by glob is asked as written (any node behind it
// answers), and the answer says so, never "(pod X's node)".
func TestAPlatformEndpointIsSaidToBeAskedAsWritten(t *testing.T) {
	c, _ := tenantController(t, "*.minio.example.com")
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://lb.minio.example.com:9000"))
	require.NoError(t, err)

	n := newMinIONodes(t, map[string]int{"lb.minio.example.com:9000": http.StatusPreconditionFailed})
	tn.dial = n.dial
	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotNow))
	assert.NotContains(t, err.Error(), "pod minio-pool-1-0's node",
		"lb.minio.example.com answered, not necessarily pod minio-pool-1-0's node")

	n = newMinIONodes(t, map[string]int{"lb.minio.example.com:9000": http.StatusOK})
	tn.dial = n.dial
	asked, err = tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.NoError(t, err)
	assert.NotEmpty(t, asked, "the condition should say the platform's endpoint answered, not the pod's own node")
}

// TestANotReadyEndpointOfAReadyPodWaits: the Pod is Ready (the rollout
// asks only then: st.ready), but its endpoint in the Service's slice is
// not ready yet (the endpointslice controller lags the Pod's condition,
// or MinIO's readiness flapped). The Service does lead to the pod: it
// waits, no other node is asked in its stead, and the wait, which the
// rollout's condition quotes, does not say MinIO said no.
func TestANotReadyEndpointOfAReadyPodWaits(t *testing.T) {
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

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.True(t, errors.Is(err, ErrNotNow), "pod minio-pool-1-0's own node says 412; approved through %v (%s)", n.asked, asked)
	assert.Empty(t, n.asked, "no node was dialled")
	assert.Contains(t, err.Error(), "Service t/minio lists Pod minio-pool-1-0's endpoint as not ready yet")
	assert.NotContains(t, err.Error(), "MinIO says", "nothing was dialled, yet the wait is worded as MinIO's answer")
}

// TestAPodsEndpointPastTheFirstSlicesIsFound: the apiserver honours
// Limit (maxSlices = 8) and returns the slices in name order with a
// continue token. A Service whose 9th slice holds the pod's endpoint (a
// large or fragmented Service; slices the tenant wrote, named to sort
// first) is read page after page, and the pod's own node is asked.
func TestAPodsEndpointPastTheFirstSlicesIsFound(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn, cs := tenantAt(t, n, "http://minio.t.svc.cluster.local", pool1InTheNinthSlice()...)
	pagedSlices(cs, 0)

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	assert.Empty(t, asked, "the Service does lead to minio-pool-1-0 (slice minio-zz); only the first %d slices were read", maxSlices)
	assert.True(t, errors.Is(err, ErrNotNow), "minio-pool-1-0's own node says 412: %v", err)
	assert.Equal(t, []string{"10.0.0.6:9000"}, n.asked, "its own node only")
}

// pool1InTheNinthSlice is twoPools with minio-pool-1-0's endpoint in a
// ninth slice, minio-zz, after eight of minio-pool-0-0's.
func pool1InTheNinthSlice() []runtime.Object {
	objs := twoPools("minio-pool-0-0")
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			for i := range maxSlices {
				extra := s.DeepCopy()
				extra.Name = fmt.Sprintf("minio-0%d", i)
				objs = append(objs, extra)
			}
			pool1 := s.DeepCopy()
			pool1.Name = "minio-zz"
			pool1.Endpoints = []discoveryv1.Endpoint{tEndpoint("10.0.0.6", "", "t", "minio-pool-1-0", true)}
			return append(objs, pool1)
		}
	}
	return objs
}

// pagedSlices serves EndpointSlice lists as the apiserver does: name
// order, Limit items, a continue token; the failPage-th List (from 1)
// fails as the apiserver does while etcd changes leader.
func pagedSlices(cs *fake.Clientset, failPage int) {
	gvr := discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	gvk := discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	page := 0
	cs.PrependReactor("list", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		page++
		if page == failPage {
			return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
		}
		la := a.(k8stesting.ListActionImpl)
		o, err := cs.Tracker().List(gvr, gvk, la.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := o.(*discoveryv1.EndpointSliceList)
		slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
		start := 0
		if c := la.ListOptions.Continue; c != "" {
			start, _ = strconv.Atoi(c)
		}
		list.Items = list.Items[start:]
		if l := int(la.ListOptions.Limit); l > 0 && len(list.Items) > l {
			list.Items = list.Items[:l]
			list.ListMeta = metav1.ListMeta{Continue: strconv.Itoa(start + l)}
		}
		return true, list, nil
	})
}
