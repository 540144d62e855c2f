package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// withNodes sets the ObjectStore's status.nodes as the updater writes
// them from MinIO's server info.
func (f *fixture) withNodes(endpoints ...string) {
	f.t.Helper()
	var nodes []any
	for _, e := range endpoints {
		nodes = append(nodes, map[string]any{"endpoint": e, "release": "RELEASE.2026-01-10T10-00-00Z"})
	}
	require.NoError(f.t, unstructured.SetNestedSlice(f.store.Object, nodes, "status", "nodes"))
}

// TestASingleServersRefusalDoesNotHoldItsRestart: a single MinIO server
// answers 412 to the maintenance check whatever its health (the check
// leaves out the answering node's own drives, and it has no others).
// Heeded, its certificate restart would wait for ever, its certificates
// going stale; replacing it costs what any restart of it costs. MinIO's
// own count of its servers (status.nodes) says it is alone.
func TestASingleServersRefusalDoesNotHoldItsRestart(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			s := heldSet("s-pool-0", 1, strategy)
			f := newFixture(t, s, podsOf(s))
			f.withNodes("s-pool-0-0.s-hl.t.svc.cluster.local:9000")
			f.health.err = fmt.Errorf("412 from /minio/health/cluster?maintenance=true: %w", ErrNotNow)
			_, err := f.sync()
			require.NoError(t, err)
			assert.Equal(t, 1, f.health.asked, "MinIO is asked")
			c := f.Condition(t, "t", "s")
			assert.Equal(t, ReasonReplacingPod, c.Reason)
			assert.Contains(t, c.Message, "replacing pod s-pool-0-0, the tenant's only MinIO server (status.nodes and its StatefulSets agree), whatever its maintenance check says")
			if strategy == appsv1.OnDeleteStatefulSetStrategyType {
				_, err = f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-pool-0-0", metav1.GetOptions{})
				assert.Error(t, err, "deleted")
				return
			}
			got, err := f.Kube.AppsV1().StatefulSets("t").Get(context.Background(), "s-pool-0", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Zero(t, *got.Spec.UpdateStrategy.RollingUpdate.Partition, "handed to the statefulset controller")
		})
	}
}

// TestOnePodBesidePeersNoStatefulSetListsIsNotAlone: what the
// StatefulSets list is not what MinIO runs. One StatefulSet per node,
// the other three deleted with --cascade=orphan to be recreated (the
// usual way to change volumeClaimTemplates): their pods still serve, and
// the held node is the only pod of a listed StatefulSet. MinIO counts
// four servers, says 412, and the pod waits. (Found by a hostile review
// of a first fix that counted the StatefulSets' replicas.)
func TestOnePodBesidePeersNoStatefulSetListsIsNotAlone(t *testing.T) {
	s := heldSet("s-node-0", 1, appsv1.OnDeleteStatefulSetStrategyType)
	pods := podsOf(s)
	for i := 1; i < 4; i++ {
		name := fmt.Sprintf("s-node-%d-0", i)
		pods[name] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", UID: "orphan",
				Labels: map[string]string{appsv1.StatefulSetPodNameLabel: name, v1.ObjectStoreLabel: "s"}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	for _, nodes := range [][]string{nil, {"s-node-0-0:9000", "s-node-1-0:9000", "s-node-2-0:9000", "s-node-3-0:9000"}} {
		f := newFixture(t, s, pods)
		f.withNodes(nodes...)
		f.health.err = fmt.Errorf("412: %w", ErrNotNow)
		_, err := f.sync()
		require.NoError(t, err)
		_, err = f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-node-0-0", metav1.GetOptions{})
		assert.NoError(t, err, "not deleted (status.nodes %v)", nodes)
		assert.Equal(t, ReasonWaitingForQuorum, f.Condition(t, "t", "s").Reason)
	}
}

// TestTwoPodsAreStillAskedFor: a refusal of a tenant whose status lists
// no nodes (the updater could not read them) is heeded.
func TestTwoPodsAreStillAskedFor(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.health.err = fmt.Errorf("412: %w", ErrNotNow)
	_, err := f.sync()
	require.NoError(t, err)
	assert.Equal(t, 1, f.health.asked)
	assert.Equal(t, ReasonWaitingForQuorum, f.Condition(t, "t", "s").Reason)
}

// TestAStaleSingleServerStatusDoesNotDeleteAPodOfFour: status.nodes is
// what MinIO's server info last said, kept while the updater cannot read
// it (credentials rotated, configuration Secret missing); a tenant that
// was one server and now runs four StatefulSet pods is not alone, and its
// 412 holds. (Found by a hostile review of a first fix that trusted
// status.nodes alone.)
func TestAStaleSingleServerStatusDoesNotDeleteAPodOfFour(t *testing.T) {
	s := heldSet("s-pool-0", 4, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.withNodes("s-pool-0-0.s-hl.t.svc.cluster.local:9000") // from when it was alone
	f.health.err = fmt.Errorf("412: %w", ErrNotNow)
	_, err := f.sync()
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Pods("t").Get(context.Background(), "s-pool-0-3", metav1.GetOptions{})
	assert.NoError(t, err, "not deleted")
	assert.Equal(t, ReasonWaitingForQuorum, f.Condition(t, "t", "s").Reason)
}
