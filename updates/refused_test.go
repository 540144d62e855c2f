package updates

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
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
		// Transport words that name no URL of ours, in the call's error.
		{"XMinioAdminUpdateApplyFailure: connection refused", true, false},
		{"XMinioAdminUpdateApplyFailure: write: broken pipe", true, false},
		{"MethodNotAllowed: server closed, update disabled", true, false},
	} {
		assert.Equal(t, c.want, downloadRefused(c.msg, url, c.whole), c.msg)
	}
}

func retryAt(d time.Duration, refusals int) func(*observation) {
	return func(o *observation) {
		at := metav1.NewTime(t0.Add(d))
		o.recorded.RetryAt, o.recorded.Refusals = &at, refusals
	}
}

func TestOurRefusalIsRetriedWithinTheTimeoutNeverCounted(t *testing.T) {
	refused := reason.Errorf(CauseDownloadRefused, "MinIO at t-hl:9000 could not fetch %s from the operator's upgrade server: Error downloading URL https://op:4221/x. Response: 503 Service Unavailable", relNew)

	// The call's download was refused: a pause, then the call again.
	a := decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) { o.call.result = &callResult{err: refused} }), p)
	assert.Equal(t, report, a.verb, "nothing is rolled")
	assert.Equal(t, CauseDownloadRefused, a.reason)
	assert.Empty(t, a.outcome, "no outcome: the failure budget never sees it")
	require.NotNil(t, a.update)
	require.NotNil(t, a.update.RetryAt)
	assert.Equal(t, t0.Add(refusedPause(p)), a.update.RetryAt.Time)
	assert.Equal(t, 1, a.update.Refusals)
	assert.Contains(t, a.message, "not the tenant's failure")

	// Each pause doubles...
	a = decide(obs(recorded(3, time.Minute, time.Second), retryAt(-2*time.Second, 2), func(o *observation) { o.call.result = &callResult{err: refused} }), p)
	assert.Equal(t, t0.Add(4*refusedPause(p)), a.update.RetryAt.Time)
	// ...and never runs past the update's timeout.
	a = decide(obs(recorded(3, p.timeout-time.Second, time.Second), retryAt(-2*time.Second, 4), func(o *observation) { o.call.result = &callResult{err: refused} }), p)
	assert.Equal(t, t0.Add(time.Second), a.update.RetryAt.Time)

	// Every node's .minisig refused alike: the same.
	a = decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
		o.call.result = &callResult{failed: []string{"node a: Error downloading URL https://op:4221/x.minisig. Response: 503 Service Unavailable"}, refused: 1}
	}), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.reason)

	// Waiting for the retry.
	a = decide(obs(recorded(1, time.Minute, time.Minute), retryAt(time.Second, 1)), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.reason)
	assert.Equal(t, time.Second, a.after)

	// The time came: MinIO is called again, however many calls were made.
	a = decide(obs(recorded(maxCalls, 2*time.Minute, time.Minute), retryAt(-time.Second, 3)), p)
	assert.Equal(t, call, a.verb)
	assert.Equal(t, maxCalls+1, a.update.Calls)

	// Refused for the whole timeout: rolled, so the tenant gets its
	// release and gives back its place in flight, and not counted.
	a = decide(obs(recorded(4, p.timeout+time.Second, 2*time.Minute), retryAt(-time.Second, 4)), p)
	assert.Equal(t, roll, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.cause, "the budget counts only InPlaceRefused and NodesNotUpdated")

	// The tenant's own refusal is still rolled at once.
	a = decide(obs(recorded(1, time.Minute, time.Minute), func(o *observation) {
		o.call.result = &callResult{err: reason.Errorf(CauseInPlaceRefused, "MethodNotAllowed")}
	}), p)
	assert.Equal(t, roll, a.verb)
}

func TestARecordWithARetryIsWrittenOnceNotEverySync(t *testing.T) {
	at1, at2 := metav1.NewTime(t0), metav1.NewTime(t0)
	a := v1.UpdateStatus{Release: relNew, RetryAt: &at1, Refusals: 1}
	b := v1.UpdateStatus{Release: relNew, RetryAt: &at2, Refusals: 1}
	assert.True(t, a.Equal(b), "the same time under two pointers is the same record")
	b.Refusals = 2
	assert.False(t, a.Equal(b))
	b.Refusals, b.RetryAt = 1, nil
	assert.False(t, a.Equal(b))
}

// TestATenantWordingItsFailureAsOursHoldsNoPlacePastTheTimeout: a
// tenant's MinIO answers every call with the words of our own refusal.
// It is retried, never counted, but only within the update's timeout, as
// any update: then it is rolled, and its place in flight (the fleet's only
// one here) goes to the next tenant.
func TestATenantWordingItsFailureAsOursHoldsNoPlacePastTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFixtureWith(t, func(c *Config) {
		c.Clock, c.MaxInFlight, c.FailureBudget, c.HaltNamespace = clk, 1, 1, "ops"
	}, fakeBinaries{}, tenantStore("evil", "tenant"), tenantStore("good", "tenant"))
	adm := f.admin("evil", "tenant")
	adm.refuse, adm.code = true, "XMinioAdminUpdateUnexpectedFailure"
	adm.refusal = "Error downloading URL " + updateBase + "/minio." + relNew + ".sha256sum. Response: 503 Service Unavailable"
	f.lead(t)
	ctx := t.Context()
	var evil *v1.ObjectStore
	for range 40 {
		require.NoError(t, f.c.sync(ctx, "evil/tenant"))
		f.waitCallDone(t, "evil/tenant")
		f.catchUp(t, "evil", "tenant")
		if evil = f.live(t, "evil", "tenant"); conditionOf(evil).Reason == ReasonRollingUpdate {
			break
		}
		clk.Step(refusedPause(f.c.params()))
	}
	assert.Equal(t, ReasonRollingUpdate, conditionOf(evil).Reason, "rolled once the update's timeout passed")
	assert.Nil(t, evil.Status.Update, "its place in flight is given back")
	assert.Equal(t, 1, adm.callCount(), "the retry would have come after the update's timeout (the fixture's is shorter than a pause)")
	for _, a := range f.kube.Actions() {
		assert.False(t, a.GetResource().Resource == "leases" && a.GetVerb() != "get", "nothing is counted against the release (a budget of 1 would halt it): %v", a)
	}

	require.NoError(t, f.c.sync(ctx, "good/tenant"))
	good := conditionOf(f.live(t, "good", "tenant"))
	assert.Equal(t, ReasonUpdatingInPlace, good.Reason, "the honest tenant takes the place: %s", good.Message)
}

// The e2e run that failed (TestOurOwnRefusalIsRetriedNotRolled, one run
// of five): call 1's download was refused; call 2 updated three nodes
// and MinIO damaged the binary of the fourth ("Updated file has wrong
// checksum"); call 3, to that node, damaged it again. The refused call
// counted against maxCalls, so no fourth call was made and the tenant
// waited for the timeout to be rolled. Our own refusals leave the tenant
// its calls: the node left behind is called again.
func TestOurRefusalsDoNotUseTheCallsForNodesLeftBehind(t *testing.T) {
	damaged := func(o *observation) {
		o.nodes = nodesOn(relNew, relOld)
		o.call.result = &callResult{failed: []string{"node n1:9000: Updated file has wrong checksum"}, transient: 1, updated: 1}
	}
	a := decide(obs(recorded(maxCalls, 2*time.Minute, time.Minute), retryAt(-3*time.Minute, 1), pastRetry, damaged), p)
	assert.Equal(t, call, a.verb, "%+v", a)
	assert.Equal(t, "n1:9000", a.host)
	assert.Equal(t, maxCalls+1, a.update.Calls)

	// Without a refusal the calls are the tenant's: maxCalls at most.
	a = decide(obs(recorded(maxCalls, 2*time.Minute, time.Minute), damaged), p)
	assert.NotEqual(t, call, a.verb, "%+v", a)
}

// pastRetry: the retry after the refusal was made (the last call came
// after RetryAt).
func pastRetry(o *observation) {
	o.recorded.LastCall = metav1.NewTime(o.recorded.RetryAt.Add(time.Second))
}

// A dry run's download refused by our own server follows the same rule as
// a call's, and the call made again is a dry run: nothing restarts before
// every node has verified the binary.
func TestOurRefusalOfADryRunIsRetriedAsADryRun(t *testing.T) {
	// Waiting for the retry.
	a := decide(obs(dryRunRecorded(1, time.Minute, time.Minute), retryAt(time.Second, 1)), p)
	assert.Equal(t, report, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.reason)
	assert.Contains(t, a.message, "in the dry run")
	assert.Equal(t, time.Second, a.after)

	// The time came: a dry run again, not the real call.
	a = decide(obs(dryRunRecorded(1, 2*time.Minute, time.Minute), retryAt(-time.Second, 1)), p)
	assert.Equal(t, call, a.verb)
	assert.True(t, a.dryRun)
	assert.Equal(t, 2, a.update.DryRuns)
	assert.Zero(t, a.update.Calls)

	// The binary gone meanwhile: stopped, not rolled.
	a = decide(obs(dryRunRecorded(1, 2*time.Minute, time.Minute), retryAt(-time.Second, 1), func(o *observation) {
		o.urlErr = errors.New("no such release in the store")
	}), p)
	assert.Equal(t, ReasonDryRunFailed, a.reason)
	assert.NotEqual(t, roll, a.verb)

	// Refused for the whole timeout: the fallback, not counted.
	a = decide(obs(dryRunRecorded(4, p.timeout+time.Second, 2*time.Minute), retryAt(-time.Second, 4)), p)
	assert.Equal(t, roll, a.verb)
	assert.Equal(t, CauseDownloadRefused, a.cause)
	assert.Contains(t, a.message, "in the dry run")
}
