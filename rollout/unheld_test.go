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
// (docs/restarts.md). plan counts only the pods of the StatefulSets it
// holds: a pod down in another StatefulSet of the same ObjectStore (an
// OnDelete pool the image was set on after an in-place update is never
// held, updates.patchImages; or one the tenant did not annotate) is not
// seen, and a serving pod of the held pool is taken down beside it. With
// maxUnavailable 1 the ObjectStore then has two pods down; the
// maintenance check, the tenant's MinIO's own answer, is all that stands
// between it and quorum.
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
