package updates

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMinIOsWordsForOurRefusalAreKnown(t *testing.T) {
	const url = "https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update/sha256/ab/t/minio.RELEASE.2026-02-20T10-00-00Z.sha256sum"
	for _, c := range []struct {
		msg   string
		whole bool
		want  bool
	}{
		// Our 503, on the .sha256sum (the call) or a node's .minisig.
		{"XMinioAdminUpdateUnexpectedFailure: Error downloading URL " + url + ". Response: 503 Service Unavailable", true, true},
		{"Error downloading URL https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update/minio.RELEASE.X.minisig. Response: 503 Service Unavailable", false, true},
		// A connection closed on accept, or during a shutdown.
		{`XMinioAdminUpdateURLNotReachable: Get "` + url + `": EOF`, true, true},
		{`Get "` + url + `": read tcp 10.0.0.5:4545->10.0.0.9:4221: read: connection reset by peer`, false, true},
		{`XMinioAdminUpdateURLNotReachable: Get "` + url + `": dial tcp 10.96.0.10:4221: connect: connection refused`, true, true},
		// The binary's stream cut (a download below the minimum rate).
		{"XMinioAdminUpdateUnexpectedFailure: unexpected EOF", true, true},
		// The tenant's own failures.
		{"XMinioAdminUpdateUnexpectedFailure: Error downloading URL " + url + ". Response: 404 Not Found", true, false},
		{`XMinioAdminUpdateURLNotReachable: Get "` + url + `": tls: failed to verify certificate: x509: certificate signed by unknown authority`, true, false},
		{"MethodNotAllowed: Server update is disabled", true, false},
		{"open /usr/bin/.minio.new: permission denied", false, false},
		{"Updated file has wrong checksum", false, false},
		// A node that could not reach its peer: not our server.
		{"dial tcp 10.0.0.7:9000: connect: connection refused", false, false},
		{"unexpected EOF", false, false},
	} {
		assert.Equal(t, c.want, downloadRefused(c.msg, url, c.whole), c.msg)
	}
}

func retryAt(d time.Duration) func(*observation) {
	return func(o *observation) {
		at := metav1.NewTime(t0.Add(d))
		o.recorded.RetryAt = &at
	}
}

func TestOurRefusalIsRetriedNeverRolledNorCounted(t *testing.T) {
	refused := errorf(CauseDownloadRefused, "MinIO at t-hl:9000 could not fetch %s from the operator's upgrade server: Error downloading URL https://op:4221/x. Response: 503 Service Unavailable", relNew)

	// The call's download was refused: a pause, then the call again.
	a := decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.call.result = &callResult{err: refused} }), p)
	assert.Equal(t, report, a.verb, "nothing is rolled")
	assert.Equal(t, CauseDownloadRefused, a.reason)
	assert.Empty(t, a.outcome, "no outcome: the failure budget never sees it")
	require.NotNil(t, a.update)
	require.NotNil(t, a.update.RetryAt)
	assert.Equal(t, t0.Add(refusedPause(p)), a.update.RetryAt.Time)
	assert.Contains(t, a.message, "not the tenant's failure")

	// Every node's .minisig refused alike: the same.
	a = decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
		o.call.result = &callResult{failed: []string{"node a: Error downloading URL https://op:4221/x.minisig. Response: 503 Service Unavailable"}, refused: 1}
	}), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.reason)

	// Waiting for the retry, even past the update's timeout.
	a = decide(obs(recorded(1, time.Hour, time.Hour), retryAt(time.Second)), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.reason)
	assert.Equal(t, time.Second, a.after)

	// The time came: MinIO is called again, however many calls were made.
	a = decide(obs(recorded(maxCalls, time.Hour, time.Hour), retryAt(-time.Second)), p)
	assert.Equal(t, call, a.verb)
	assert.Equal(t, maxCalls+1, a.update.Calls)

	// After the retried call, the timeout counts from the retry: an
	// update started an hour ago is still followed...
	a = decide(obs(recorded(2, time.Hour, time.Minute), retryAt(-2*time.Minute)), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, ReasonUpdatingInPlace, a.reason)
	// ...and rolled only once the tenant itself took longer than it.
	a = decide(obs(recorded(2, time.Hour, 20*time.Minute), retryAt(-21*time.Minute)), p)
	assert.Equal(t, roll, a.verb)
	assert.Equal(t, CauseNodesNotUpdated, a.cause)

	// The tenant's own refusal is still rolled.
	a = decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
		o.call.result = &callResult{err: errorf(CauseInPlaceRefused, "MethodNotAllowed")}
	}), p)
	assert.Equal(t, roll, a.verb)
}
