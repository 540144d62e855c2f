package placement

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
)

func set(name, store string, selector map[string]string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels: map[string]string{v1.ObjectStoreLabel: store}},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: selector}},
		},
	}
}

func pod(name, owner, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{"pool": owner, PodSelector: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner, UID: types.UID("uid-" + owner),
				Controller: new(true)}}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "minio", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func nodeOn(name, arch string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelOS: "linux", LabelArch: arch, "zone": "a"}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
}

// TestSourceFindsATenantsPodsThroughItsStatefulSets: a tenant's pods are
// those its labelled StatefulSets' selectors match and own; a pod bound,
// or a Node relabelled, reports the tenant changed.
func TestSourceFindsATenantsPodsThroughItsStatefulSets(t *testing.T) {
	stray := pod("stray", "t-pool-0", "amd")
	stray.OwnerReferences[0].Name = "someone-else" // matches the selector, owned by another
	cs := fake.NewSimpleClientset(
		set("t-pool-0", "t", nil), set("u-pool-0", "u", map[string]string{LabelArch: "arm64"}),
		pod("t-pool-0-0", "t-pool-0", "arm"), pod("t-pool-0-1", "t-pool-0", ""), stray,
		nodeOn("arm", "arm64"), nodeOn("amd", "amd64"))
	f := informers.NewSharedInformerFactory(cs, 0)
	pods, nodes := f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer()
	require.NoError(t, pods.SetTransform(TrimPod))
	require.NoError(t, nodes.SetTransform(TrimNode))
	var mu sync.Mutex
	changed := map[string]int{}
	s, err := NewSource(f.Apps().V1().StatefulSets().Informer(), pods, nodes, zerolog.Nop())
	require.NoError(t, err)
	s.OnChange(func(key string) {
		mu.Lock()
		defer mu.Unlock()
		changed[key]++
	})
	f.Start(t.Context().Done())
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), s.HasSynced))

	assert.Equal(t, []string{"linux/arm64"}, s.Platforms("ns", "t"), "its pod's Node, not the stray pod's")
	assert.Equal(t, []string{"linux/arm64"}, s.Platforms("ns", "u"), "no pods: the node selector")
	assert.Nil(t, s.Platforms("ns", "none"), "no StatefulSets: nothing known")

	// What the informers hold is trimmed.
	obj, _, _ := nodes.GetIndexer().GetByKey("arm")
	assert.Equal(t, map[string]string{LabelOS: "linux", LabelArch: "arm64"}, obj.(*corev1.Node).Labels)
	assert.Empty(t, obj.(*corev1.Node).Status.Images)
	obj, _, _ = pods.GetIndexer().GetByKey("ns/t-pool-0-0")
	assert.Empty(t, obj.(*corev1.Pod).Spec.Containers)

	count := func(key string) int { mu.Lock(); defer mu.Unlock(); return changed[key] }
	before := count("ns/t")
	bound := pod("t-pool-0-1", "t-pool-0", "amd")
	_, err = cs.CoreV1().Pods("ns").Update(t.Context(), bound, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return count("ns/t") > before }, 5*time.Second, 10*time.Millisecond, "a pod bound")
	assert.Eventually(t, func() bool { return len(s.Platforms("ns", "t")) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, s.Platforms("ns", "t"))

	before = count("ns/t")
	relabelled := nodeOn("arm", "amd64")
	_, err = cs.CoreV1().Nodes().Update(t.Context(), relabelled, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return count("ns/t") > before }, 5*time.Second, 10*time.Millisecond, "a Node relabelled")
	assert.Equal(t, []string{"linux/amd64"}, s.Platforms("ns", "t"))
}

// TestSourceWithoutRightsOnPodsAndNodesStillSyncs: an operator whose RBAC
// lacks list on pods and nodes is not held: the source counts as synced
// and answers from node selectors.
func TestSourceWithoutRightsOnPodsAndNodesStillSyncs(t *testing.T) {
	cs := fake.NewSimpleClientset(set("u-pool-0", "u", map[string]string{LabelArch: "arm64"}), set("t-pool-0", "t", nil))
	for _, resource := range []string{"pods", "nodes"} {
		cs.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource(resource), "", errors.New("RBAC"))
		})
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	s, err := NewSource(f.Apps().V1().StatefulSets().Informer(), f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer(), zerolog.Nop())
	require.NoError(t, err)
	f.Start(t.Context().Done())
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), s.HasSynced))
	assert.Equal(t, []string{"linux/arm64"}, s.Platforms("ns", "u"))
	assert.Equal(t, []string{Default}, s.Platforms("ns", "t"))
}
