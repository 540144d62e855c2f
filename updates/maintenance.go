package updates

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minio/madmin-go/v3"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// ErrNotNow is MayTakeDown's answer when MinIO says no node may go down
// now: 412 (quorum would be lost) or any answer but 200 (the cluster is
// not healthy as it is).
var ErrNotNow = errors.New("MinIO says no node may go down now")

// maintenanceTimeout bounds the check: MinIO answers it from memory.
const maintenanceTimeout = 10 * time.Second

// MayTakeDown asks the ObjectStore's MinIO whether one more of its nodes
// may go down now, as MinIO offers orchestrators:
// GET /minio/health/cluster?maintenance=true, anonymous, through the
// endpoint, the policy and the CAs of the updater's own calls. nil: 200.
// ErrNotNow, wrapped with what MinIO answered: wait. Any other error
// (CauseTenantUnreachable, CauseEndpointNotAllowed): it could not be
// asked.
func (c *Controller) MayTakeDown(ctx context.Context, store *v1.ObjectStore) error {
	t, err := c.reach(ctx, store)
	if err != nil {
		return err
	}
	return t.maintenance(ctx)
}

func (t *tenant) maintenance(ctx context.Context) error {
	tr, err := t.transport(t.endpoint.Host)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	client, err := madmin.NewAnonymousClient(t.endpoint.Host, t.endpoint.Scheme == "https")
	if err != nil {
		return fmt.Errorf("health client for %s: %w", t.endpoint.Redacted(), err)
	}
	client.SetCustomTransport(limitedBodies{tr})
	ctx, cancel := context.WithTimeout(ctx, maintenanceTimeout)
	defer cancel()
	h, err := client.Healthy(ctx, madmin.HealthOpts{Maintenance: true})
	switch {
	case err != nil:
		return reason.Errorf(CauseTenantUnreachable, "maintenance check at %s: %w", t.endpoint.Redacted(), adminError(err))
	case h.MaintenanceMode:
		return fmt.Errorf("%w: 412 from /minio/health/cluster?maintenance=true: taking a node down now would lose quorum", ErrNotNow)
	case !h.Healthy:
		return fmt.Errorf("%w: /minio/health/cluster?maintenance=true did not answer 200; the cluster is not healthy now", ErrNotNow)
	}
	return nil
}
