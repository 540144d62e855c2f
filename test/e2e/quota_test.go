package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStoreFullForATenantPastItsShare: a namespace's ObjectStores fill
// its share of the store; the next one that would land new bytes is
// BinaryAvailable=False, StoreFull, naming the namespace's usage and its
// share. What was served stays served, bytes already stored still come
// free, and another namespace's tenant is unaffected.
func TestStoreFullForATenantPastItsShare(t *testing.T) {
	const share = 5 << 19 // 2.5 MiB: two 1 MiB binaries fit, a third does not
	e := newBinEnv(t, fmt.Sprintf("OPERATOR_STORE_NAMESPACE_MAX_BYTES=%d", share), "OPERATOR_STORE_MAX_BYTES=64Mi")
	bins := [][]byte{randomBytes(t, 1<<20), randomBytes(t, 1<<20), randomBytes(t, 1<<20)}
	images := make([]string, len(bins))
	for i, b := range bins {
		rel := fmt.Sprintf("RELEASE.2025-0%d-01T00-00-00Z", i+1)
		images[i] = e.reg.pushImage(t, fmt.Sprintf("tenant/minio:%s", rel), imageSpec{binary: b, releaseLbl: rel})
	}
	for i := range 2 {
		name := fmt.Sprintf("s%d", i)
		e.objectStore(t, name, images[i])
		e.waitBinaryCondition(t, name, metav1.ConditionTrue, "Available")
	}
	urls := []string{waitBinaryStatus(t, e.tenantNS, "s0", bins[0]).URL, waitBinaryStatus(t, e.tenantNS, "s1", bins[1]).URL}

	e.objectStore(t, "s2", images[2])
	c := e.waitBinaryCondition(t, "s2", metav1.ConditionFalse, "StoreFull")
	t.Logf("StoreFull: %s", c.Message)
	assert.Contains(t, c.Message, "namespace "+e.tenantNS)
	assert.Contains(t, c.Message, fmt.Sprintf("use %d bytes of its share of %d bytes", 2<<20, share), "it names the usage and the limit")
	assert.Contains(t, c.Message, "OPERATOR_STORE_NAMESPACE_MAX_BYTES", "and what the platform team can change")
	assert.Nil(t, binaryStatus(t, e.tenantNS, "s2"))

	client := e.op.client(t, testCluster.KubeletServingCA, 2)
	for i, u := range urls {
		assert.Equal(t, bins[i], updateClientWalk(t, client, u), "what was served stays served")
	}
	// Bytes the namespace already has cost nothing more.
	e.objectStore(t, "s0-again", images[0])
	e.waitBinaryCondition(t, "s0-again", metav1.ConditionTrue, "Available")

	// Another namespace's tenant has its own share.
	other := &binEnv{tenantNS: operatorNamespace(t), reg: e.reg, opNS: e.opNS, op: e.op}
	other.objectStore(t, "other", images[2])
	other.waitBinaryCondition(t, "other", metav1.ConditionTrue, "Available")
	assert.Equal(t, bins[2], updateClientWalk(t, client, waitBinaryStatus(t, other.tenantNS, "other", bins[2]).URL))
	assert.Equal(t, metav1.ConditionFalse, conditionOf(t, e.tenantNS, "s2", "BinaryAvailable").Status, "s2 stays past its namespace's share")
}
