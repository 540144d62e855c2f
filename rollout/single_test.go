package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTheOnlyPodOfAnObjectStoreIsReplacedWithoutAsking: a single MinIO
// node answers 412 to the maintenance check whatever its health (the
// check leaves out the answering node's own drives, and it has no
// others: cmd/erasure-server-pool.go Health). Asking would hold its
// certificate restart for ever, its certificates going stale; replacing
// its only pod costs what any restart of it costs.
func TestTheOnlyPodOfAnObjectStoreIsReplacedWithoutAsking(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			s := heldSet("s-pool-0", 1, strategy)
			f := newFixture(t, s, podsOf(s))
			f.health.err = fmt.Errorf("412 from /minio/health/cluster?maintenance=true: %w", ErrNotNow)
			_, err := f.sync()
			require.NoError(t, err)
			assert.Zero(t, f.health.asked, "MinIO is not asked")
			c := f.Condition(t, "t", "s")
			assert.Equal(t, ReasonReplacingPod, c.Reason)
			assert.Contains(t, c.Message, "replacing pod s-pool-0-0, the ObjectStore's only pod, without the maintenance check")
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

// TestTwoPodsAreStillAskedFor: the exception is for one pod alone.
func TestTwoPodsAreStillAskedFor(t *testing.T) {
	s := heldSet("s-pool-0", 2, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.health.err = fmt.Errorf("412: %w", ErrNotNow)
	_, err := f.sync()
	require.NoError(t, err)
	assert.Equal(t, 1, f.health.asked)
	assert.Equal(t, ReasonWaitingForQuorum, f.Condition(t, "t", "s").Reason)
}
