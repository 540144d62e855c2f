package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/rollout"
)

// A certificate restart of a real MinIO of two pools, three nodes each,
// reached through a Service of the tenant's namespace whose EndpointSlices
// lead to each node at a port of its own (the Service maps 9000 to them,
// as kube-proxy would). A node of the first pool is down. MinIO's
// maintenance check answers for the node that answers it: the second
// pool's nodes, the Service's first addresses, say 200, though no pod of
// the first may go. The operator asks each pod's own node, so the first
// pool waits for its node, and no pool ever has two nodes down.
func TestEachPodIsAskedAboutByItsOwnNode(t *testing.T) {
	t.Parallel()
	host := hostAddress(t)
	e := newUpdateEnv(t, updateOpts{deferMinIO: true, releases: make([]string, 6)})
	ns, cs := e.tenantNS, adminClient(t)
	const service = "tenant-api"
	name := fmt.Sprintf("%s.%s.svc", service, ns)
	ca := e.useTenantCA(t, host, name)
	e.minioPorts = consecutivePorts(t, 3, 2)
	e.minio = startMinIOLayout(t, minioLayout{host: host, pools: 2}, e.minioPorts, e.releases, e.certs, e.roots, e.minioEnv...)
	pool := func(node int) int { return node / 3 }

	// The env's own StatefulSet has pods no MinIO runs in: a and b, a
	// pool each, take its place.
	require.NoError(t, cs.AppsV1().StatefulSets(ns).Delete(t.Context(), poolName(e.store), metav1.DeleteOptions{}))
	nodeOf := map[string]int{"a-0": 0, "a-1": 1, "a-2": 2, "b-0": 3, "b-1": 4, "b-2": 5}
	k := newMinIOKubelet(t, e.minio, ns, e.store, nodeOf)
	minioStatefulSet(t, ns, e.store, "a", 3, e.oldImage, appsv1.RollingUpdateStatefulSetStrategyType)
	minioStatefulSet(t, ns, e.store, "b", 3, e.oldImage, appsv1.OnDeleteStatefulSetStrategyType)

	// The Service, and a slice per pod: ordered by name, the second
	// pool's nodes are the Service's first addresses.
	_, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9000, TargetPort: intstr.FromString("api")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for pod, node := range nodeOf {
		portName, port, ready := "api", int32(e.minioPorts[node]), true
		_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%s", service, 1-pool(node), pod), Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	patch := fmt.Sprintf(`{"spec":{"updates":{"endpoint":"https://%s:9000"}}}`, name)
	_, err = dyn(t).Resource(apiv1.Resource).Namespace(ns).Patch(t.Context(), e.store, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)

	waitFirstRestart(t, ns, "a", "b")
	require.Eventually(t, func() bool {
		c := conditionOf(t, ns, e.store, apiv1.ConditionPodsCurrent)
		return c.Status == metav1.ConditionTrue && k.allReady()
	}, 3*time.Minute, 100*time.Millisecond, "the first rollout of the pools ends")
	k.mu.Lock()
	k.replaced, k.downAt = nil, nil
	k.mu.Unlock()

	// twoDown is a moment a pool had two nodes down, if there was one.
	twoDown := func() []int {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, down := range k.downAt {
			per := map[int]int{}
			for _, n := range down {
				if per[pool(n)]++; per[pool(n)] > 1 {
					return down
				}
			}
		}
		return nil
	}

	// a-0's node fails outside its pod; its pod stays Ready. Once MinIO
	// sees it: a-2's own node says no, a node of the second pool says 200.
	k.stopOutside(0)
	waitFor(t, time.Minute, "a-2's node says 412 and b-0's 200", func() bool {
		return maintenance(t, e.minio, 2) == http.StatusPreconditionFailed && maintenance(t, e.minio, 3) == http.StatusOK
	})
	rotated := tenantTLS(t, ca, host, name)
	putNamedSecret(t, ns, "tenant-tls", rotated)
	var c metav1.Condition
	require.Eventually(t, func() bool {
		c = conditionOf(t, ns, e.store, apiv1.ConditionPodsCurrent)
		return c.Reason == rollout.ReasonWaitingForQuorum || twoDown() != nil
	}, 3*time.Minute, 100*time.Millisecond, "the rollout waits for MinIO")
	require.Nil(t, twoDown(), "nodes down at once; nodes 0-2 are the first pool, 3-5 the second")
	t.Logf("while a-0's node is down: %s", c.Message)
	assert.Contains(t, c.Message, "pod a-2 waits")
	assert.Contains(t, c.Message, "pod a-2's node", "asked of the pod's own node")
	_, replaced, _, _ := k.figures()
	assert.Empty(t, replaced, "no pod is taken down while its own node says 412")

	k.startOutside(0)
	require.Eventually(t, func() bool {
		c = conditionOf(t, ns, e.store, apiv1.ConditionPodsCurrent)
		return c.Status == metav1.ConditionTrue || twoDown() != nil
	}, 5*time.Minute, 200*time.Millisecond, "every pod replaced")
	require.Nil(t, twoDown(), "nodes down at once; nodes 0-2 are the first pool, 3-5 the second")
	_, replaced, _, errs := k.figures()
	require.Empty(t, errs)
	t.Logf("replaced in order: %v", replaced)
	assert.ElementsMatch(t, []string{"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}, replaced, "each pod once")
	for i := range e.minioPorts {
		assert.Equal(t, rotated["tls.crt"], pemOf(servedCertificate(t, e.minio.addr(i))), "node %d serves the new certificate", i)
	}
}

// maintenance is what MinIO node i answers to the maintenance check.
func maintenance(t testing.TB, m *minioCluster, i int) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.roots}}}
	resp, err := client.Get("https://" + m.addr(i) + "/minio/health/cluster?maintenance=true")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// consecutivePorts is pools runs of size free ports, each run
// consecutive (MinIO names a pool's nodes by one range).
func consecutivePorts(t testing.TB, size, pools int) []int {
	t.Helper()
	var out []int
	for tries := 0; len(out) < size*pools && tries < 100; tries++ {
		run := freePorts(t, size)
		if run[size-1]-run[0] == size-1 {
			out = append(out, run...)
		}
	}
	require.Len(t, out, size*pools, "runs of %d consecutive free ports", size)
	return out
}
