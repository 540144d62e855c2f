package updates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/minio/madmin-go/v3"

	"github.com/object-store-operator/operator/internal/reason"
)

// adminAPI is the part of MinIO's admin API the controller calls.
type adminAPI interface {
	ServerInfo(ctx context.Context, opts ...func(*madmin.ServerInfoOpts)) (madmin.InfoMessage, error)
	ServerUpdateV2(ctx context.Context, opts madmin.ServerUpdateOpts) (madmin.ServerUpdateStatusV2, error)
}

// dialAdmin returns an admin client for a tenant's host ("" for its
// endpoint) and what releases its connections.
func (c *Controller) dialAdmin(t *tenant, host string) (adminAPI, func(), error) {
	if c.dial != nil {
		return c.dial(t, host)
	}
	adm, tr, err := t.admin(host)
	if err != nil {
		return nil, nil, err
	}
	return adm, tr.CloseIdleConnections, nil
}

// node is one MinIO server as its admin API reports it.
type node struct {
	endpoint string // host:port
	online   bool
	release  string
}

// serverInfoTimeout bounds asking a tenant which release its nodes run:
// MinIO answers in milliseconds; a sync holds a worker while it waits.
const serverInfoTimeout = 10 * time.Second

// serverInfo asks the tenant which release each node runs.
func (c *Controller) serverInfo(ctx context.Context, t *tenant) ([]node, error) {
	adm, done, err := c.dialAdmin(t, "")
	if err != nil {
		return nil, reason.Wrap(CauseTenantUnreachable, err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, serverInfoTimeout)
	defer cancel()
	info, err := adm.ServerInfo(ctx)
	if err != nil {
		return nil, reason.Errorf(CauseTenantUnreachable, "MinIO admin API at %s: %w", t.endpoint.Redacted(), adminError(err))
	}
	if len(info.Servers) == 0 {
		return nil, reason.Errorf(CauseTenantUnreachable, "MinIO admin API at %s reported no servers", t.endpoint.Redacted())
	}
	if len(info.Servers) > maxNodes {
		return nil, reason.Errorf(CauseTenantUnreachable, "MinIO admin API at %s reported %d servers, more than the %d the operator reads", t.endpoint.Redacted(), len(info.Servers), maxNodes)
	}
	nodes := make([]node, 0, len(info.Servers))
	for _, srv := range info.Servers {
		// What MinIO reports is the tenant's to write: bounded and cleaned
		// before it reaches a condition or a dial.
		n := node{endpoint: cleanText(srv.Endpoint, maxField), online: srv.State == string(madmin.ItemOnline)}
		if n.online {
			if n.release, err = releaseOfVersion(srv.Version); err != nil {
				n.release = cleanText(srv.Version, maxField)
			}
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].endpoint < nodes[j].endpoint })
	return nodes, nil
}

// callOnce makes one ServerUpdateV2 call through host, a dry run or the
// update, and sorts the per-node results: failures as "node <host>:
// <MinIO's error>", how many of them are a damaged download, and how many
// nodes updated (or, in a dry run, passed).
func (c *Controller) callOnce(ctx context.Context, t *tenant, updateURL, host, release string, dryRun bool) callResult {
	adm, done, err := c.dialAdmin(t, host)
	if err != nil {
		return callResult{err: reason.Wrap(CauseTenantUnreachable, err)}
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	kind := kindUpdate
	if dryRun {
		kind = kindDryRun
	}
	c.metrics.calls.WithLabelValues(kind).Inc()
	result, err := adm.ServerUpdateV2(ctx, madmin.ServerUpdateOpts{UpdateURL: updateURL, DryRun: dryRun})
	if err != nil {
		return c.callFailed(ctx, t, err, updateURL, host, release, dryRun)
	}
	return c.sortResults(result, updateURL, release)
}

// callFailed sorts a ServerUpdateV2 call that got no 200: no answer of
// MinIO's (followed), our own server's refusal, or MinIO's refusal, of
// the update or (in a dry run) of the binary.
func (c *Controller) callFailed(ctx context.Context, t *tenant, err error, updateURL, host, release string, dryRun bool) callResult {
	answered := madmin.ToErrorResponse(err).Code != ""
	switch {
	case strings.Contains(err.Error(), updateInProgress):
		// A call of ours is being answered by MinIO already: follow it.
		return callResult{lost: true}
	case (reason.Of(err) == "" || reason.Of(err) == CauseTenantUnreachable) && !answered && (ctx.Err() == nil || dryRun):
		// No answer of MinIO's, refusing or not: the connection broke,
		// or the Service had no ready Pod to dial at that moment (its
		// Pods restarting)
		// (a node re-executes as the new release as soon as every node
		// has it, and can drop the answer with it). The nodes may be
		// updating: follow the recorded update, done when every node
		// reports the release, rolled past the update's timeout. A dry
		// run unanswered by its deadline says nothing of the release
		// either (verify stops it past the update's timeout, uncounted).
		c.log.Warn().Str("release", release).Str("node", host).Bool("dryRun", dryRun).Err(err).Msg("the update call got no answer; following the nodes")
		return callResult{lost: true}
	}
	// The node that answered: the one called through, else the
	// tenant's endpoint (which node behind it answered, MinIO's error
	// does not say).
	node := host
	if node == "" {
		node = t.endpoint.Host
	}
	if downloadRefused(adminError(err).Error(), updateURL, true) {
		return callResult{err: reason.Errorf(CauseDownloadRefused, "MinIO at %s could not fetch %s from the operator's upgrade server: %w", node, release, adminError(err))}
	}
	if dryRun && madmin.ToErrorResponse(err).Code != "MethodNotAllowed" {
		// A refusal of the release (its .sha256sum, its binary), not of
		// in-place updates as such (MethodNotAllowed: MINIO_UPDATE=off,
		// which the real call would answer alike).
		return callResult{err: reason.Errorf(CauseDryRunFailed, "MinIO at %s failed the dry run of %s: %w", node, release, adminError(err))}
	}
	return callResult{err: reason.Errorf(CauseInPlaceRefused, "MinIO at %s refused the in-place update to %s: %w", node, release, adminError(err))}
}

// sortResults sorts the nodes' answers to a call MinIO answered.
func (c *Controller) sortResults(result madmin.ServerUpdateStatusV2, updateURL, release string) callResult {
	var r callResult
	if len(result.Results) > maxNodes {
		result.Results = result.Results[:maxNodes]
	}
	for _, n := range result.Results {
		n.Host, n.Err = cleanText(n.Host, maxField), cleanText(n.Err, maxField)
		switch {
		case n.Err == "":
			r.updated++
		case strings.Contains(n.Err, "running the latest version"), strings.Contains(n.Err, updateInProgress):
			// A node that already runs the release (a retry), or one
			// taking the binary from a call still being answered.
		default:
			r.failed = append(r.failed, fmt.Sprintf("node %s: %s", n.Host, n.Err))
			switch {
			case downloadRefused(n.Err, updateURL, false):
				r.refused++
			case strings.Contains(n.Err, "wrong checksum") || strings.Contains(n.Err, "magic number mismatch"):
				r.transient++
			}
		}
	}
	sort.Strings(r.failed)
	switch {
	case len(r.failed) > 0 && len(r.failed) != r.transient:
		c.log.Warn().Str("release", release).Strs("failed", r.failed).Msg("some nodes did not update")
	case len(r.failed) > 0:
		// MinIO's own bug under load (see maxCalls): said, so that a
		// tenant left on two releases shows why in the log.
		c.log.Info().Str("release", release).Strs("failed", r.failed).Str("reason", "BinaryDamagedByMinIO").
			Msg("MinIO damaged the binary on its way to some nodes; they are called again")
	}
	return r
}

// updateInProgress is what MinIO answers a call that arrives while it is
// still verifying or installing the binary of another.
const updateInProgress = "update already in progress"

// failedHost is the host of a "node <host>: <error>" failure.
func failedHost(failure string) string {
	h, _, _ := strings.Cut(strings.TrimPrefix(failure, "node "), ": ")
	return h
}

// adminError words err with MinIO's own error code and message where
// there is one (bounded by the transport, see limitedBodies); otherwise
// it is err itself, whose cause, such as an endpoint refused at dial
// time, then stays visible to causeOf.
func adminError(err error) error {
	if e := madmin.ToErrorResponse(err); e.Code != "" {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	// A connection the operator did not make for a reason of its own
	// (resolve): that reason, without the request's method and URL.
	var nd notDialled
	if errors.As(err, &nd) {
		return nd.err
	}
	return err
}

// maxNodes bounds the nodes read from one tenant's answer: MinIO's
// largest deployments have hundreds.
const maxNodes = 4096

// maxField bounds a field of a tenant's 200 answer (a node's endpoint,
// version or error) quoted in a condition.
const maxField = 256

// describeNodes says which node runs what, for messages.
func describeNodes(nodes []node) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if !n.online {
			parts = append(parts, n.endpoint+" offline")
			continue
		}
		parts = append(parts, n.endpoint+" runs "+n.release)
	}
	return strings.Join(parts, ", ")
}

// allOn tells whether every node is online and runs release, as MinIO
// orders releases.
func allOn(nodes []node, release string) bool {
	if len(nodes) == 0 || release == "" {
		return false
	}
	for _, n := range nodes {
		if !n.online || !sameRelease(n.release, release) {
			return false
		}
	}
	return true
}

func allOnline(nodes []node) bool {
	return !slices.ContainsFunc(nodes, func(n node) bool { return !n.online })
}

// oldest is the oldest release the online nodes run ("" when none is known).
func oldest(nodes []node) string {
	var out string
	var at time.Time
	for _, n := range nodes {
		t, err := releaseTime(n.release)
		if err != nil {
			continue
		}
		if out == "" || t.Before(at) {
			out, at = n.release, t
		}
	}
	return out
}
