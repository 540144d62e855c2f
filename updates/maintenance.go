package updates

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/minio/madmin-go/v3"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
)

// ErrNotNow is MayTakeDown's answer when MinIO says no node may go down
// now: 412 (quorum would be lost) or any answer but 200 (the cluster is
// not healthy as it is).
var ErrNotNow = errors.New("MinIO says no node may go down now")

// notAskedYet is a wait before MinIO was asked: the pod's own endpoint is
// not listed ready yet, or the operator's read of the API failed. It is
// ErrNotNow to the rollout (it waits and asks again), worded as what it
// is, not as MinIO's answer.
type notAskedYet struct{ error }

func (n notAskedYet) Is(target error) bool { return target == ErrNotNow }
func (n notAskedYet) Unwrap() error        { return n.error }

// maintenanceTimeout bounds the check: MinIO answers it from memory.
const maintenanceTimeout = 10 * time.Second

// MayTakeDown asks the ObjectStore's MinIO whether pod may go down now,
// as MinIO offers orchestrators: GET /minio/health/cluster?maintenance=true,
// anonymous, through the endpoint, the policy and the CAs of the
// updater's own calls. nil: 200. ErrNotNow: wait, with what MinIO
// answered, or why it was not asked yet (the pod's endpoint not listed
// ready, the API not read). Any other error (CauseTenantUnreachable,
// CauseEndpointNotAllowed): it could not be asked. asked says who may
// have answered in the pod's node's stead, for the rollout's message.
//
// MinIO's check answers for the node that answers it: it leaves that
// node's own drives out and says whether every erasure set keeps its
// write quorum (cmd/erasure-server-pool.go, Health). Any node of a
// Service may answer, and in a tenant of several pools one of another
// pool would say 200 while taking pod down costs its own pool its
// quorum. So when the endpoint is a Service of the namespace, pod's own
// endpoint of it is asked: the Service's name (which MinIO's certificate
// serves) at the port the Service leads to. A pod the Service does not
// select (a Service of one pool, say) is asked about through the
// Service as a whole, and asked says so.
func (c *Controller) MayTakeDown(ctx context.Context, store *v1.ObjectStore, pod string) (asked string, err error) {
	// The check's deadline bounds the read of the tenant's CAs too.
	ctx, cancel := context.WithTimeout(ctx, maintenanceTimeout)
	defer cancel()
	t, err := c.reach(ctx, store)
	if err != nil && reason.Of(err) == "" {
		// The operator's own read (the tenant's CAs): the pod waits.
		return "", notAskedYet{fmt.Errorf("maintenance check not made: %w", err)}
	}
	if err != nil {
		return "", err
	}
	return t.mayTakeDown(ctx, pod)
}

func (t *tenant) mayTakeDown(ctx context.Context, pod string) (asked string, err error) {
	// One deadline for both tries: a tenant whose nodes accept and never
	// answer holds a rollout worker for one timeout, not two.
	ctx, cancel := context.WithTimeout(ctx, maintenanceTimeout)
	defer cancel()
	target, err := t.policy.route(t.endpoint.Host, t.namespace, t.clusterDomain)
	// own: the endpoint names the pod's own node (<pod>.<service>): its
	// endpoint is the pod's, as through a Service.
	own := pod != "" && err == nil && target != nil && target.pod == pod
	if pod == "" || err != nil || target == nil || target.pod != "" && !own {
		// An endpoint the platform allowed, or one naming another node:
		// asked as written, whichever node answers there.
		return fmt.Sprintf("asked %s as written: whichever node answers there", t.endpoint.Redacted()), t.maintenance(ctx, "")
	}
	err = t.maintenance(ctx, pod)
	var nb notBehind
	var nr endpointNotReady
	switch {
	case errors.As(err, &nr):
		// The Service leads to the pod, whose endpoint is not ready
		// there yet (its slice lags the Pod): asked again soon, never
		// of another node in its stead.
		return "", notAskedYet{nr.error}
	case errors.As(err, &nb) && !own:
		return fmt.Sprintf("asked through %s as a whole: %v", t.endpoint.Redacted(), nb.error), t.maintenance(ctx, "")
	}
	return "", err
}

// maintenance asks the endpoint, only pod's endpoint of it when pod is
// not "" (transport).
func (t *tenant) maintenance(ctx context.Context, pod string) error {
	tr, err := t.transport(t.endpoint.Host, pod)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	client, err := madmin.NewAnonymousClient(t.endpoint.Host, t.endpoint.Scheme == "https")
	if err != nil {
		return fmt.Errorf("health client for %s: %w", t.endpoint.Redacted(), err)
	}
	client.SetCustomTransport(limitedBodies{tr})
	// A Service's endpoint is found through the API inside the dial: a
	// read that hangs past the deadline ends the request before any
	// connection begins, with the request's error, not the dial's. (Any
	// other host is looked up by DNS there: its stall is no read of the
	// operator's.)
	target, _ := t.policy.route(t.endpoint.Host, t.namespace, t.clusterDomain)
	// Those reads get half the time: slow ones that finish late must not
	// leave the node no time to answer, and be taken for its silence.
	if d, ok := ctx.Deadline(); ok {
		ctx = context.WithValue(ctx, resolveByKey{}, time.Now().Add(time.Until(d)/2))
	}
	var connecting atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{ConnectStart: func(string, string) { connecting.Store(true) }})
	h, err := client.Healthy(ctx, madmin.HealthOpts{Maintenance: true})
	by := ""
	if pod != "" {
		by = fmt.Sprintf(" (pod %s's node)", pod)
	}
	switch {
	case err != nil:
		var nb notBehind
		if errors.As(err, &nb) {
			return nb
		}
		var nr endpointNotReady
		if errors.As(err, &nr) {
			return nr
		}
		// The operator's own read of the API failed (a 503 while etcd
		// changes leader): that is no MinIO it cannot ask, whose pods
		// go on readiness alone. The pod waits, and is asked about again.
		var nd notDialled
		if errors.As(err, &nd) && reason.Of(nd.err) == "" {
			return notAskedYet{fmt.Errorf("maintenance check at %s%s not made: %w", t.endpoint.Redacted(), by, nd.err)}
		}
		if target != nil && !connecting.Load() && ctx.Err() != nil {
			return notAskedYet{fmt.Errorf("maintenance check at %s%s not made: no connection was begun in time (the operator's reads to find the endpoint did not finish): %w", t.endpoint.Redacted(), by, ctx.Err())}
		}
		return reason.Errorf(CauseTenantUnreachable, "maintenance check at %s%s: %w", t.endpoint.Redacted(), by, adminError(err))
	case h.MaintenanceMode:
		return fmt.Errorf("%w: 412 from /minio/health/cluster?maintenance=true%s: taking a node down now would lose quorum", ErrNotNow, by)
	case !h.Healthy:
		return fmt.Errorf("%w: /minio/health/cluster?maintenance=true%s did not answer 200; the cluster is not healthy now", ErrNotNow, by)
	}
	return nil
}
