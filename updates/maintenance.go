package updates

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// MayTakeDown asks the ObjectStore's MinIO whether pod, of the
// StatefulSet whose spec.serviceName is service, may go down now, as
// MinIO offers orchestrators: GET /minio/health/cluster?maintenance=true,
// anonymous, through the endpoint policy and the CAs of the updater's own
// calls. nil: 200. ErrNotNow, wrapped with what MinIO answered: wait.
// Any other error (CauseTenantUnreachable, CauseEndpointNotAllowed): it
// could not be asked.
func (c *Controller) MayTakeDown(ctx context.Context, store *v1.ObjectStore, pod, service string) error {
	t, err := c.reach(ctx, store)
	if err != nil {
		return err
	}
	return t.mayTakeDown(ctx, pod, service)
}

// mayTakeDown asks pod's own node. MinIO's check answers for the node
// that answers it: it leaves that node's own drives out and says whether
// every erasure set keeps its write quorum (cmd/erasure-server-pool.go,
// Health). Through a Service any node may answer, and in a tenant of
// several pools one of another pool would say 200 while taking pod down
// costs its own pool its quorum. So when the endpoint is a Service of the
// namespace, the node is asked at <pod>.<service>.<ns>.svc[.<domain>] on
// the endpoint's port: the name MinIO's peers reach it by, which its
// certificate serves. Otherwise (an endpoint the platform allowed, a
// StatefulSet without a Service name), or when that name cannot be
// asked, the endpoint is.
func (t *tenant) mayTakeDown(ctx context.Context, pod, service string) error {
	host := t.podHost(pod, service)
	if host == "" {
		return t.maintenance(ctx, t.endpoint.Host)
	}
	podErr := t.maintenance(ctx, host)
	if podErr == nil || errors.Is(podErr, ErrNotNow) {
		return podErr
	}
	if err := t.maintenance(ctx, t.endpoint.Host); err != nil {
		return fmt.Errorf("%w (asked at %s: its node %s could not be asked: %v)", err, t.endpoint.Redacted(), host, podErr)
	}
	return nil
}

// podHost is pod's own name beside the endpoint, "" when it has none.
func (t *tenant) podHost(pod, service string) string {
	if pod == "" || service == "" {
		return ""
	}
	target, err := t.policy.route(t.endpoint.Host, t.namespace, t.clusterDomain)
	if err != nil || target == nil {
		return ""
	}
	host := pod + "." + service + "." + t.namespace + ".svc"
	if t.clusterDomain != "" {
		host += "." + t.clusterDomain
	}
	if port := t.endpoint.Port(); port != "" {
		return net.JoinHostPort(host, port)
	}
	return host
}

func (t *tenant) maintenance(ctx context.Context, host string) error {
	tr, err := t.transport(host)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	client, err := madmin.NewAnonymousClient(host, t.endpoint.Scheme == "https")
	if err != nil {
		return fmt.Errorf("health client for %s: %w", host, err)
	}
	client.SetCustomTransport(limitedBodies{tr})
	ctx, cancel := context.WithTimeout(ctx, maintenanceTimeout)
	defer cancel()
	h, err := client.Healthy(ctx, madmin.HealthOpts{Maintenance: true})
	switch {
	case err != nil:
		return reason.Errorf(CauseTenantUnreachable, "maintenance check at %s: %w", host, adminError(err))
	case h.MaintenanceMode:
		return fmt.Errorf("%w: 412 from %s/minio/health/cluster?maintenance=true: taking a node down now would lose quorum", ErrNotNow, host)
	case !h.Healthy:
		return fmt.Errorf("%w: %s/minio/health/cluster?maintenance=true did not answer 200; the cluster is not healthy now", ErrNotNow, host)
	}
	return nil
}
