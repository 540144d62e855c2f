package v1

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValueFitsLongNamesAndKeepsThemApart(t *testing.T) {
	assert.Equal(t, "tenant-a", ObjectStoreLabelValue("tenant-a"))
	exact := strings.Repeat("a", 63)
	assert.Equal(t, exact, ObjectStoreLabelValue(exact))

	long := strings.Repeat("a", 51) + "." + strings.Repeat("b", 148) // 200 characters, a dot at 52
	other := strings.Repeat("a", 51) + "." + strings.Repeat("c", 148)
	for _, name := range []string{long, other} {
		v := ObjectStoreLabelValue(name)
		assert.Empty(t, validation.IsValidLabelValue(v), "%q is a valid label value", v)
		assert.LessOrEqual(t, len(v), 63)
		assert.Equal(t, v, ObjectStoreLabelValue(name), "stable")
	}
	assert.NotEqual(t, ObjectStoreLabelValue(long), ObjectStoreLabelValue(other), "two long names sharing a prefix differ")
}

func TestRolloutIdleOnlyWhenTheRolloutWaits(t *testing.T) {
	for reason, idle := range map[string]bool{
		PodsWaitingForQuorum: true, PodsWaitingForUpdate: true, PodsTimedOut: true, PodsTooMany: true,
		"ReplacingPod": false, "PodsCurrent": false,
	} {
		assert.Equal(t, idle, RolloutIdle(&metav1.Condition{Type: ConditionPodsCurrent, Status: metav1.ConditionFalse, Reason: reason}), reason)
	}
	assert.False(t, RolloutIdle(nil), "no condition yet: the rollout may be about to replace")
	assert.False(t, RolloutIdle(&metav1.Condition{Type: ConditionPodsCurrent, Status: metav1.ConditionTrue, Reason: PodsWaitingForQuorum}))
}
