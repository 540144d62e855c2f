package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// unasked is Health's error as cmd/operator's maintenanceCheck hands on
// updates' notAskedYet: ErrNotNow to errors.Is, worded as what it is
// (nothing was asked of MinIO), not as MinIO's answer.
type unasked struct{ error }

func (unasked) Is(target error) bool { return target == ErrNotNow }

// TestASingleServerNotAskedIsNotSaidToHaveRefused: a single server
// whose check was not made (its endpoint not listed yet, an API error)
// is replaced as when it says 412, and the condition does not say MinIO
// refused.
func TestASingleServerNotAskedIsNotSaidToHaveRefused(t *testing.T) {
	s := heldSet("s-pool-0", 1, appsv1.OnDeleteStatefulSetStrategyType)
	f := newFixture(t, s, podsOf(s))
	f.withNodes("s-pool-0-0.s-hl.t.svc.cluster.local:9000")
	f.health.err = unasked{errorString("maintenance check at https://s-hl.t.svc.cluster.local:9000 (pod s-pool-0-0's node) not made: read Pod t/s-pool-0-0: etcdserver: leader changed")}
	_, err := f.sync()
	require.NoError(t, err)
	c := f.Condition(t, "t", "s")
	require.Equal(t, ReasonReplacingPod, c.Reason)
	assert.NotContains(t, c.Message, "said no", "nothing was asked of MinIO, yet the condition says its check said no: %s", c.Message)
}

type errorString string

func (e errorString) Error() string { return string(e) }
