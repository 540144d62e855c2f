package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

func TestTwoReplicasFileOneCSRBothServeAndTheLeaderHandsOver(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	csrs := recordCSRs(t, ns)
	env := soloEnv(ns, "OPERATOR_LEASE_DURATION=3s", "OPERATOR_LEASE_RENEW_DEADLINE=2s", "OPERATOR_LEASE_RETRY_PERIOD=200ms")
	a := startOperator(t, env)
	b := startOperator(t, env)

	leafA, err := servedLeaf(a, ns, testCluster.KubeletServingCA)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		leafB, err := servedLeaf(b, ns, testCluster.KubeletServingCA)
		return err == nil && leafB.SerialNumber.Cmp(leafA.SerialNumber) == 0
	}, 5*time.Second, 10*time.Millisecond, "both replicas serve the Secret's certificate")
	csrs.assertFiled(t, 1, "only the leader files a CSR")

	// objectstore_operator_leader says which replica leads.
	leader, follower := a, b
	if counter(t, a, "objectstore_operator_leader") != 1 {
		leader, follower = b, a
	}
	require.Equal(t, 1.0, counter(t, leader, "objectstore_operator_leader"))
	require.Equal(t, 0.0, counter(t, follower, "objectstore_operator_leader"))

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	require.Eventually(t, func() bool { return counter(t, follower, "objectstore_operator_leader") == 1 },
		15*time.Second, 50*time.Millisecond, "the surviving replica takes over once the lease expires")

	// The new leader does the leader's work: a deleted Secret is reissued.
	require.NoError(t, adminClient(t).CoreV1().Secrets(ns).Delete(t.Context(), autocertSecret, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		leaf, err := servedLeaf(follower, ns, testCluster.KubeletServingCA)
		return err == nil && leaf.SerialNumber.Cmp(leafA.SerialNumber) != 0
	}, 10*time.Second, 20*time.Millisecond, "new certificate from the new leader")
	csrs.assertFiled(t, 2)
	waitNoCSRLeft(t, ns)

	// client-go's own lines (leader election, reflectors) are JSON too.
	for _, line := range strings.Split(strings.TrimSpace(follower.logs.String()), "\n") {
		assert.True(t, json.Valid([]byte(line)), "log line is not JSON: %s", line)
	}
	assert.Contains(t, follower.logs.String(), `"component":"client-go"`)
}

// TestLeaderThatLeadsAgainStillIssues: a replica that loses leadership
// (here: its Lease is deleted) and wins it back must do the leader's work
// again in the new term.
func TestLeaderThatLeadsAgainStillIssues(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	csrs := recordCSRs(t, ns)
	op := startOperator(t, soloEnv(ns, "OPERATOR_LEASE_DURATION=3s", "OPERATOR_LEASE_RENEW_DEADLINE=2s", "OPERATOR_LEASE_RETRY_PERIOD=200ms"))
	first, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err)

	// Another holder takes the Lease: the operator cannot renew, steps down,
	// and wins it back once the thief's lease expires.
	// The operator renews every 200 ms: a renewal between the read and the
	// write is a conflict, and the theft is tried again.
	leases := adminClient(t).CoordinationV1().Leases(ns)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(t.Context(), "object-store-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		thief, now, duration := "thief", metav1.NewMicroTime(time.Now()), int32(3)
		lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime, lease.Spec.LeaseDurationSeconds = &thief, &now, &now, &duration
		_, err = leases.Update(t.Context(), lease, metav1.UpdateOptions{})
		return err
	}))
	require.Eventually(t, func() bool { return counter(t, op, "objectstore_operator_leader") == 0 }, 20*time.Second, 50*time.Millisecond, "leadership lost")
	require.Eventually(t, func() bool { return counter(t, op, "objectstore_operator_leader") == 1 },
		20*time.Second, 50*time.Millisecond, "leadership won back")

	require.NoError(t, adminClient(t).CoreV1().Secrets(ns).Delete(t.Context(), autocertSecret, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		leaf, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
		return err == nil && leaf.SerialNumber.Cmp(first.SerialNumber) != 0
	}, 15*time.Second, 20*time.Millisecond, "the second term's issuer reissues")
	csrs.assertFiled(t, 2)
	waitNoCSRLeft(t, ns)
}
