package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// maxUnavailable counts the pods of the ObjectStore that are down,
// "counting pods that are down for reasons of their own"
// (docs/restarts.md), in its StatefulSets the rollout does not hold too
// (an OnDelete pool given the image after an in-place update is never
// held). Counting only the held ones, plan took a serving pod down beside
// one already down elsewhere, leaving the tenant's quorum to the
// maintenance check alone, its own MinIO's answer.
func TestAPodDownInAnUnheldStatefulSetCountsAgainstMaxUnavailable(t *testing.T) {
	held := heldSet("s-pool-0", 4, appsv1.RollingUpdateStatefulSetStrategyType)
	unheld := heldSet("s-pool-1", 4, appsv1.OnDeleteStatefulSetStrategyType)
	delete(unheld.Annotations, v1.RolloutAnnotation)
	pods := podsOf(held)
	for k, p := range podsOf(unheld) {
		pods[k] = p
	}
	notReady(pods, "s-pool-1-2") // down for reasons of its own
	st := plan([]*appsv1.StatefulSet{held, unheld}, pods, 1, 10*time.Minute, t0)
	assert.NotEqual(t, replace, st.verb,
		"maxUnavailable 1 and pod s-pool-1-2 of the ObjectStore is down, yet plan takes down serving pod %s (ready %v)", st.pod, st.ready)
}
