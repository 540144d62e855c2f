package updates

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/internal/reason"
)

// TestAGlobEndpointWhoseDNSNeverAnswersIsNotAnAPIWait: the platform
// allows *.stall.example, and the tenant's spec.updates.endpoint is a
// name under it whose DNS never answers. No connection begins before the
// check's deadline, but no read of the operator's stalled either (only
// Service routes read the API to find the endpoint): a MinIO the operator
// cannot ask, replaced on readiness alone rather than never, as when the
// name server refuses at once. (A hostile review found it waiting for
// ever.) The test swaps net.DefaultResolver's dialer and restores it; it
// is not parallel.
func TestAGlobEndpointWhoseDNSNeverAnswersIsNotAnAPIWait(t *testing.T) {
	preferGo, dial := net.DefaultResolver.PreferGo, net.DefaultResolver.Dial
	t.Cleanup(func() { net.DefaultResolver.PreferGo, net.DefaultResolver.Dial = preferGo, dial })
	net.DefaultResolver.PreferGo = true
	c, cs := tenantController(t, "*.stall.example")
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://minio.stall.example:9000"))
	require.NoError(t, err)
	require.Nil(t, tn.dial, "the production dialer")

	// Control: the name server refuses at once: a MinIO that cannot be
	// asked, replaced on readiness alone.
	net.DefaultResolver.Dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("test DNS: refused")
	}
	_, err = tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrNotNow), "%v", err)
	require.Equal(t, CauseTenantUnreachable, reason.Of(err))

	net.DefaultResolver.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // the name server never answers
		return nil, ctx.Err()
	}

	// The check's own deadline (maintenanceTimeout), shortened.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	asked, err := tn.mayTakeDown(ctx, "minio-pool-1-0")
	require.Error(t, err)
	for _, a := range cs.Actions() {
		t.Logf("API action: %s %s", a.GetVerb(), a.GetResource().Resource)
	}
	assert.False(t, errors.Is(err, ErrNotNow),
		"no API read stalled (only DNS did) and nothing can be asked; the rollout waits for ever instead of readiness alone: cause %q, err %v (asked %q)",
		reason.Of(err), err, asked)
}
