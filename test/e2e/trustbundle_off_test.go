package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Where the API serves no ClusterTrustBundles (Kubernetes up to 1.36
// without the ClusterTrustBundle gate, as this package's control plane),
// the operator asks discovery, says so in one info line (docs/trust.md)
// and makes no request on clustertrustbundles, not even when its
// certificate changes; it logs no error over it. test/trustbundle runs
// with the gate on.
func TestClusterTrustBundlesNotServedNothingAttempted(t *testing.T) {
	ensureCRD(t)
	// A store of its own: the audited namespace's default directory may
	// hold binaries of earlier tests, signed with keys of their own.
	env := auditedOperatorEnv(t, "OPERATOR_UPDATE_DIR="+t.TempDir())
	from := time.Now()
	op := startOperator(t, env)
	op.waitLog(t, "ClusterTrustBundles are not served")
	to := time.Now()
	for _, ev := range auditedRequests(t, from, to) {
		assert.NotEqual(t, "clustertrustbundles", ev.ObjectRef.Resource, "%s on clustertrustbundles", ev.Verb)
	}
	logs := op.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "ClusterTrustBundle"), "one line says it, nothing more")
	// Other tenants' errors (the operator sees every namespace, earlier
	// tests' ObjectStores too) are not this test's.
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"level":"error"`) {
			assert.NotRegexp(t, `(?i)trustbundle|clustertrustbundle`, line)
		}
	}
}
