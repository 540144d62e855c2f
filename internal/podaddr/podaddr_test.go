package podaddr

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/placement"
)

// pod is a running pod of a StatefulSet.
func pod(ns, name string, hostNetwork bool, ips ...string) *corev1.Pod {
	controller := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "minio", Controller: &controller}}},
		Spec: corev1.PodSpec{HostNetwork: hostNetwork}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func store(ns, name, sha256 string, updating bool) *unstructured.Unstructured {
	status := map[string]any{"binary": map[string]any{"sha256": sha256}}
	if updating {
		status["update"] = map[string]any{"release": "RELEASE.2025-04-08T15-41-24Z"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
		"metadata": map[string]any{"namespace": ns, "name": name}, "status": status,
	}}
}

func index(t *testing.T, objs ...any) *Index {
	t.Helper()
	pods := cache.NewSharedIndexInformer(nil, &corev1.Pod{}, 0, cache.Indexers{})
	stores := cache.NewSharedIndexInformer(nil, &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	x, err := New(pods, stores)
	require.NoError(t, err)
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			require.NoError(t, pods.GetIndexer().Add(o))
		default:
			require.NoError(t, stores.GetIndexer().Add(o))
		}
	}
	return x
}

func TestAnAddressIsItsPodsNamespace(t *testing.T) {
	x := index(t,
		pod("tenant-a", "minio-0", false, "10.0.0.1", "fd00::1"),
		pod("tenant-b", "minio-0", false, "10.0.0.2"),
		pod("tenant-c", "minio-0", true, "192.168.0.10"),
		// An address two namespaces' pods claim while the informer
		// catches up names neither.
		pod("tenant-a", "minio-1", false, "10.0.0.3"), pod("tenant-b", "minio-1", false, "10.0.0.3"),
	)
	for addr, want := range map[string]string{
		"10.0.0.1": "tenant-a", "fd00::1": "tenant-a", "::ffff:10.0.0.1": "tenant-a",
		"10.0.0.2": "tenant-b", "192.168.0.10": "", "10.0.0.3": "", "10.0.0.9": "",
	} {
		assert.Equal(t, want, x.Namespace(netip.MustParseAddr(addr)), addr)
	}
	assert.Empty(t, x.Namespace(netip.Addr{}))
}

// TestAFinishedOrBarePodNamesNoAddress: a tenant can run pods that finish
// (a finished pod keeps its address, which the kubelet gives to another
// pod, and quota does not count it) or bare pods with the StatefulSet
// label; neither may take a MinIO pod's address from its namespace.
func TestAFinishedOrBarePodNamesNoAddress(t *testing.T) {
	done := pod("evil", "sweep-17", false, "10.0.0.7")
	done.Status.Phase = corev1.PodSucceeded
	bare := pod("evil", "bare", false, "10.0.0.8")
	bare.OwnerReferences = nil
	var objs []any
	for _, p := range []*corev1.Pod{done, bare, pod("good", "minio-0", false, "10.0.0.7")} {
		p.Labels = map[string]string{placement.PodSelector: p.Name}
		trimmed, err := placement.TrimPod(p) // what the informer holds
		require.NoError(t, err)
		objs = append(objs, trimmed)
	}
	x := index(t, objs...)
	assert.Equal(t, "good", x.Namespace(netip.MustParseAddr("10.0.0.7")), "the running MinIO pod's namespace")
	assert.Empty(t, x.Namespace(netip.MustParseAddr("10.0.0.8")), "a bare pod names nothing")
}

func TestOnlyAnUpdateInFlightToThatBinaryIsUpdating(t *testing.T) {
	x := index(t, store("tenant-a", "s1", "aaaa", true), store("tenant-a", "s2", "bbbb", false), store("tenant-b", "s1", "cccc", true))
	assert.True(t, x.Updating("tenant-a", "aaaa"))
	assert.False(t, x.Updating("tenant-a", "bbbb"), "an ObjectStore with no update in flight")
	assert.False(t, x.Updating("tenant-a", "cccc"), "another namespace's update")
	assert.False(t, x.Updating("tenant-b", "aaaa"))
	assert.True(t, x.Updating("tenant-a", ""), "any update in flight")
	assert.False(t, x.Updating("tenant-c", ""))
}
