package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// TestHostile37AnUnheldPoolPastTheCapMakesAMultiNodeTenantLookAlone:
// ordinals() drops a whole unheld StatefulSet from others when it would
// take the list past maxPods (a bound on work, not on what MinIO is), and
// plan then calls the held set's one pod "the ObjectStore's only pod":
// replaced without the maintenance check beside 4096 MinIO nodes. The
// lister's order decides it (held first: alone; unheld first: not).
func TestHostile37AnUnheldPoolPastTheCapMakesAMultiNodeTenantLookAlone(t *testing.T) {
	held := heldSet("s-pool-0", 1, appsv1.OnDeleteStatefulSetStrategyType)
	other := heldSet("s-pool-1", maxPods, appsv1.OnDeleteStatefulSetStrategyType)
	delete(other.Annotations, v1.RolloutAnnotation)
	st := plan([]*appsv1.StatefulSet{held, other}, podsOf(held), 1, 10*time.Minute, t0)
	require.Equal(t, replace, st.verb)
	assert.False(t, st.alone, "pod %s is one of %d MinIO nodes, yet plan says it is the ObjectStore's only pod (not asked)", st.pod, 1+maxPods)
}

// TestHostile37PeersTheListerDoesNotShowMakeANodeLookAlone: one
// StatefulSet per node (replicas 1 each, node-pinned local volumes), the
// other three orphan-deleted to be recreated (kubectl delete
// --cascade=orphan, the usual way to change volumeClaimTemplates): their
// pods still run and serve as MinIO nodes and sit in the pod informer
// (they keep statefulset.kubernetes.io/pod-name), but no StatefulSet
// lists them. alone counts StatefulSet replicas only, so the held node is
// deleted without asking MinIO, which says 412 (a peer is down, say).
// Before the change MinIO was asked and the pod waited.
func TestHostile37PeersTheListerDoesNotShowMakeANodeLookAlone(t *testing.T) {
	s := heldSet("s-node-0", 1, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	for i := 1; i < 4; i++ {
		name := fmt.Sprintf("s-node-%d-0", i)
		pods[name] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", UID: "uid-" + "orphan-" + "x",
				Labels: map[string]string{appsv1.StatefulSetPodNameLabel: name, v1.ObjectStoreLabel: "s"}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	f := newFixture(t, s, pods)
	f.health.err = fmt.Errorf("412: %w", ErrNotNow)
	_, err := f.sync()
	require.NoError(t, err)
	_, getErr := f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-node-0-0", metav1.GetOptions{})
	assert.NoError(t, getErr, "pod s-node-0-0 deleted while 3 MinIO peers run beside it")
	assert.Equal(t, 1, f.health.asked, "MinIO was not asked: %s", f.Condition(t, "t", "s").Message)
}
