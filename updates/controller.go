// Package updates drives MinIO's in-place update. When an ObjectStore's
// image holds a newer release than its nodes run, and the binary source
// has that release in the store (verified and signed), the controller asks
// MinIO's admin API (ServerUpdateV2, what `mc admin update` calls) to fetch
// it from the upgrade server, checks that every node reports it, and sets
// the StatefulSets' image so pods that restart later keep it. Whatever
// fails, it falls back to a rolling update through the StatefulSets and
// says why in the VersionCurrent condition.
//
// The update in flight is recorded in the ObjectStore's status before
// MinIO is called, so an operator restart or a new leader sees it through
// without calling again.
package updates

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binsource"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/controller"
)

// Binaries tells what an ObjectStore's image resolved to in the store.
type Binaries interface {
	Resolution(key, image string) (binsource.Resolution, bool)
}

// Catalog is the store's current verified index.
type Catalog interface {
	Current() *binstore.Snapshot
}

// ServingCertificate is the upgrade server's current certificate.
type ServingCertificate interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Config configures the controller.
type Config struct {
	// Kube reads the tenants' configuration and generated Secrets when
	// needed (nothing caches Secrets for this controller) and patches
	// StatefulSets.
	Kube         kubernetes.Interface
	Dynamic      dynamic.Interface
	ObjectStores cache.SharedIndexInformer
	Binaries     Binaries
	Store        Catalog
	// Serving is nil when the upgrade server speaks plain HTTP.
	Serving ServingCertificate
	// UpdateURL is the upgrade server's base URL as pods reach it, up to
	// and including /webhook/v1/update.
	UpdateURL     string
	ClusterDomain string
	// AllowedEndpoints is what the admin client may reach beyond the
	// ObjectStore's own namespace's Services (see EndpointPolicy).
	AllowedEndpoints EndpointPolicy
	// Timeout bounds an update: from the first call until every node
	// reports the new release. Past it the controller rolls instead.
	Timeout time.Duration
	// Poll is how often an update in flight is looked at.
	Poll     time.Duration
	Recorder record.EventRecorder
	// Remedy returns what the user should do about a cause (Cause*), in
	// the words of whoever wires this controller; "" for none.
	Remedy     func(cause string) string
	Registerer prometheus.Registerer
	Clock      clock.PassiveClock
	Log        zerolog.Logger
	Workers    int
}

// Controller keeps every ObjectStore's nodes on the release of its image.
// It runs on every replica; only the leader (see Lead) calls MinIO and
// writes.
type Controller struct {
	cfg     Config
	log     zerolog.Logger
	stores  cache.Indexer
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *metrics
	status  *statusWriter
	term    controller.Term
}

// New wires event handlers; call Run to work and Lead while leading.
func New(cfg Config) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Remedy == nil {
		cfg.Remedy = func(string) string { return "" }
	}
	if _, err := url.Parse(cfg.UpdateURL); err != nil || cfg.UpdateURL == "" {
		return nil, fmt.Errorf("updates: update URL %q: %v", cfg.UpdateURL, err)
	}
	c := &Controller{
		cfg:    cfg,
		log:    cfg.Log.With().Str("component", "updates").Logger(),
		stores: cfg.ObjectStores.GetIndexer(),
		synced: cfg.ObjectStores.HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 2*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "updates"}),
		metrics: newMetrics(cfg.Registerer),
		status:  &statusWriter{client: cfg.Dynamic, recorder: cfg.Recorder, clock: cfg.Clock},
	}
	if _, err := cfg.ObjectStores.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, obj any) {
			// Spec changes, resyncs and the pause annotation; not status
			// writes (ours included).
			o, n := old.(*unstructured.Unstructured), obj.(*unstructured.Unstructured)
			if controller.SpecChangedOrResync(old, obj) ||
				o.GetAnnotations()[v1.UpdatesPausedAnnotation] != n.GetAnnotations()[v1.UpdatesPausedAnnotation] {
				c.enqueue(obj)
			}
		},
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("updates ObjectStore handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) { controller.EnqueueObject(c.queue, obj) }

// Resolved queues the ObjectStore key: its image's release changed in the
// store (binsource's Resolved hook).
func (c *Controller) Resolved(key string) { c.queue.Add(key) }

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return errors.New("updates: informers did not sync")
	}
	controller.Run(ctx, c.queue, c.cfg.Workers, c.sync, func(key string, err error) {
		c.log.Error().Str("objectstore", key).Str("reason", causeOf(err)).Err(err).Msg("update sync failed; retrying")
	})
	return nil
}

// Lead makes this controller act until ctx (the leadership term) ends.
// A sync in flight when the term ends is cancelled with it.
func (c *Controller) Lead(ctx context.Context) error {
	c.term.Lead(ctx, func() {
		for _, key := range c.stores.ListKeys() {
			c.queue.Add(key)
		}
	})
	return nil
}

// node is one MinIO server as its admin API reports it.
type node struct {
	endpoint string // host:port
	online   bool
	release  string
}

// sync brings the ObjectStore's nodes to the release of its image, in
// place when it can, through its StatefulSets when it cannot.
func (c *Controller) sync(_ context.Context, key string) error {
	ctx := c.term.Context()
	if ctx == nil {
		return nil
	}
	obj, exists, err := c.stores.GetByKey(key)
	if err != nil {
		return fmt.Errorf("get ObjectStore %s: %w", key, err)
	}
	if !exists {
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	store, err := v1.FromUnstructured(u)
	if err != nil || store.Spec.Image == "" {
		return nil // binsource reports what does not convert
	}
	s := &syncState{c: c, u: u, store: store, key: key, now: c.cfg.Clock.Now(), log: c.log.With().Str("objectstore", key).Logger()}
	s.have, s.want = statusOf(store), statusOf(store)
	return s.run(ctx)
}

// syncState is one sync of one ObjectStore.
type syncState struct {
	c     *Controller
	u     *unstructured.Unstructured
	store *v1.ObjectStore
	key   string
	now   time.Time
	log   zerolog.Logger
	have  status // what the ObjectStore's status holds
	want  status // what it should become

	tenant *tenant
	nodes  []node
}

func (s *syncState) run(ctx context.Context) error {
	c, store := s.c, s.store
	res, resolved := c.cfg.Binaries.Resolution(s.key, store.Spec.Image)
	var reach error
	if s.tenant, reach = c.loadTenant(ctx, store); reach == nil {
		s.nodes, reach = c.serverInfo(ctx, s.tenant)
	}
	if reach == nil {
		s.want.release = oldest(s.nodes)
	}
	inflight := store.Status.Update
	paused := store.Annotations[v1.UpdatesPausedAnnotation] == "true"

	switch {
	case inflight != nil:
		return s.follow(ctx, inflight, reach)
	case reach != nil && causeOf(reach) == "":
		// A transient API error (not a typed cause): retry with backoff.
		return reach
	case resolved && res.Available && reach == nil && allOn(s.nodes, res.Release):
		return s.current(ctx, res.Release, paused)
	case paused:
		msg := "updates are paused by the annotation " + v1.UpdatesPausedAnnotation + `: "true"`
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdatesPaused, msg, 0)
	case !resolved:
		// The binary source is still resolving the image; it calls
		// Resolved when done.
		return s.finish(ctx, metav1.ConditionFalse, ReasonWaitingForBinary,
			fmt.Sprintf("waiting for the release of %s to be resolved into the upgrade store", store.Spec.Image), 0)
	}
	onImage, err := c.statefulSetsOn(ctx, store)
	if err != nil {
		return err
	}
	switch {
	case onImage && reach != nil:
		// Nothing to roll, nothing to ask: say what is missing. An
		// unreachable tenant is retried with backoff; missing configuration
		// waits for a spec change or the resync (Secrets are not watched).
		if err := s.finish(ctx, metav1.ConditionUnknown, causeOf(reach), s.withRemedy(reach), 0); err != nil {
			return err
		}
		if causeOf(reach) == CauseConfigurationMissing {
			return nil
		}
		return reach
	case onImage:
		// The StatefulSets already run spec.image: a rolling update to it
		// is under way (or pods pick it up as they restart). An in-place
		// call now would race the restarts, or repeat one that failed.
		if prev := s.want.condition(); prev != nil && prev.Reason == ReasonRollingUpdate && prev.Status != metav1.ConditionTrue {
			s.c.queue.AddAfter(s.key, s.c.cfg.Poll*5)
			return s.write(ctx, prev.Status, prev.Reason, prev.Message)
		}
		want := res.Release
		if !res.Available {
			want = "its release (not in the upgrade store: " + res.Reason + ")"
		}
		return s.finish(ctx, metav1.ConditionFalse, ReasonWaitingForNodes,
			fmt.Sprintf("the StatefulSets run %s; waiting for every node to report %s (%s)", store.Spec.Image, want, describeNodes(s.nodes)), s.c.cfg.Poll)
	case !res.Available:
		// Not a failure of the in-place path: the image itself could not be
		// pulled or verified (a registry outage, a signature that does not
		// verify, a conflicting release). Rolling pods onto it would trade a
		// verified binary for one the operator refused, or pods stuck
		// pulling; wait for BinaryAvailable instead.
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdateFailed, s.withRemedy(newError(CauseBinaryUnavailable,
			fmt.Errorf("the release of %s is not in the upgrade store (BinaryAvailable: %s); nothing is updated or rolled until it is",
				store.Spec.Image, res.Reason))), 0)
	case reach != nil:
		return s.rollBack(ctx, reach)
	}
	return s.start(ctx, res.Release)
}

// current: every node runs the wanted release. The StatefulSets follow,
// so pods that restart later keep it.
func (s *syncState) current(ctx context.Context, release string, paused bool) error {
	// Paused: not even the image is set, since that restarts pods under a
	// RollingUpdate strategy.
	if !paused {
		if _, err := s.c.setImage(ctx, s.store); err != nil {
			return s.finish(ctx, metav1.ConditionFalse, ReasonUpdateFailed, err.Error(), 0)
		}
	}
	reason, msg := ReasonCurrent, fmt.Sprintf("every node runs %s, the release of %s", release, s.store.Spec.Image)
	switch prev := s.want.condition(); {
	case paused:
		reason = ReasonUpdatesPaused
		msg += "; updates are paused by the annotation " + v1.UpdatesPausedAnnotation
	case prev != nil && (prev.Reason == ReasonUpdatedInPlace || prev.Reason == ReasonRollingUpdate):
		reason = prev.Reason
	}
	return s.finish(ctx, metav1.ConditionTrue, reason, msg, 0)
}

// start begins an update to release: in place when MinIO can take it, else
// by rolling.
func (s *syncState) start(ctx context.Context, release string) error {
	want, err := releaseTime(release)
	if err != nil {
		return s.rollBack(ctx, newError(CauseBinaryUnavailable, err))
	}
	var old, newer, offline []string
	for _, n := range s.nodes {
		t, err := releaseTime(n.release)
		switch {
		case !n.online:
			offline = append(offline, n.endpoint)
		case err != nil || t.Before(want):
			old = append(old, n.endpoint)
		case t.After(want):
			newer = append(newer, n.endpoint+" ("+n.release+")")
		}
	}
	if len(newer) > 0 {
		return s.rollBack(ctx, errorf(CauseDowngrade, "nodes %s run a newer release than %s; MinIO updates in place only forward",
			strings.Join(newer, ", "), release))
	}
	if len(offline) > 0 {
		// An update now would leave these nodes behind; wait for them.
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdateFailed,
			s.withRemedy(errorf(CauseNodeOffline, "nodes %s are offline; the update to %s starts when every node is online",
				strings.Join(offline, ", "), release)), s.c.cfg.Poll*5)
	}
	updateURL, err := s.c.updateURL(release)
	if err != nil {
		return s.rollBack(ctx, newError(CauseBinaryUnavailable, err))
	}
	if err := s.c.preflight(s.tenant.roots, updateURL, s.now); err != nil {
		return s.rollBack(ctx, err)
	}
	s.want.update = &v1.UpdateStatus{Release: release, Image: s.store.Spec.Image, Started: metav1.NewTime(s.now)}
	// A node that already runs the release answers "latest version" for
	// every node; ask one left behind, which pushes to the others.
	host := ""
	if len(old) < len(s.nodes) {
		host = old[0]
	}
	return s.call(ctx, updateURL, host)
}

// call records the call in the status (before making it), asks MinIO to
// update through host ("" for the tenant's endpoint) and reads the answer.
func (s *syncState) call(ctx context.Context, updateURL, host string) error {
	for {
		up := *s.want.update
		up.Calls++
		up.LastCall = metav1.NewTime(s.c.cfg.Clock.Now())
		s.want.update = &up
		msg := fmt.Sprintf("asked MinIO to update to %s from %s", up.Release, updateURL)
		if err := s.write(ctx, metav1.ConditionFalse, ReasonUpdatingInPlace, msg); err != nil {
			return err // nothing was called
		}
		s.log.Info().Str("release", up.Release).Str("url", updateURL).Str("node", host).Int("call", up.Calls).
			Msg("updating MinIO in place")
		failed, transient, updated, err := s.callOnce(ctx, updateURL, host)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err() // leadership ended; the next leader follows the recorded update
		case err != nil:
			return s.rollBack(ctx, err)
		case len(failed) == 0:
		case len(failed) == transient && up.Calls < maxCalls:
			// MinIO garbled the binary on its way to these nodes (see
			// maxCalls): ask one of them again, which downloads it afresh.
			s.log.Warn().Str("release", up.Release).Strs("failed", failed).Msg("nodes got a damaged copy of the binary; asking again")
			host = failedHost(failed[0])
			continue
		case updated == 0:
			return s.rollBack(ctx, errorf(CauseInPlaceRefused, "MinIO could not update in place to %s: %s", up.Release, strings.Join(failed, "; ")))
		default:
			s.log.Warn().Str("release", up.Release).Strs("failed", failed).Msg("some nodes did not update; the rest restart on the new release")
		}
		s.c.queue.AddAfter(s.key, s.c.cfg.Poll)
		return nil
	}
}

// callOnce makes one ServerUpdateV2 call through host and sorts the
// per-node results: failures as "node <host>: <MinIO's error>", how many of
// them are a damaged download, and how many nodes updated.
func (s *syncState) callOnce(ctx context.Context, updateURL, host string) (failed []string, transient, updated int, err error) {
	adm, tr, err := s.tenant.admin(host)
	if err != nil {
		return nil, 0, 0, newError(CauseTenantUnreachable, err)
	}
	defer tr.CloseIdleConnections()
	callCtx, cancel := context.WithTimeout(ctx, s.c.cfg.Timeout)
	defer cancel()
	result, err := adm.ServerUpdateV2(callCtx, madmin.ServerUpdateOpts{UpdateURL: updateURL})
	if err != nil {
		return nil, 0, 0, errorf(CauseInPlaceRefused, "MinIO refused the in-place update to %s: %s", s.want.update.Release, describeAdminError(err))
	}
	for _, r := range result.Results {
		switch {
		case r.Err == "":
			updated++
		case strings.Contains(r.Err, "running the latest version"):
			// A node that already runs the release (a retry).
		default:
			failed = append(failed, fmt.Sprintf("node %s: %s", r.Host, r.Err))
			if strings.Contains(r.Err, "wrong checksum") || strings.Contains(r.Err, "magic number mismatch") {
				transient++
			}
		}
	}
	sort.Strings(failed)
	return failed, transient, updated, nil
}

// failedHost is the host of a "node <host>: <error>" failure.
func failedHost(failure string) string {
	h, _, _ := strings.Cut(strings.TrimPrefix(failure, "node "), ": ")
	return h
}

// maxCalls is how many update calls one release gets. MinIO can damage the
// binary it pushes to some nodes right after a start ("Updated file has
// wrong checksum", "magic number mismatch": its download buffer goes back
// to a pool while still in use); a node that failed that way is asked
// again, and nodes left behind by an update are called directly.
const maxCalls = 3

// settle is how long nodes get after a call to restart on the new release
// before the ones left behind are called again.
const settle = 10 * time.Second

// follow sees an update in flight through: done when every node reports
// it, called once more for nodes left behind, rolled back past the
// timeout. It never calls while a call may still be running.
func (s *syncState) follow(ctx context.Context, up *v1.UpdateStatus, reach error) error {
	elapsed := s.now.Sub(up.Started.Time)
	if up.Image != "" && up.Image != s.store.Spec.Image {
		// spec.image changed under the update: let the next sync start over.
		s.want.update = nil
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdatingInPlace,
			fmt.Sprintf("the image changed while updating to %s; starting over", up.Release), s.c.cfg.Poll)
	}
	if reach == nil && allOn(s.nodes, up.Release) {
		s.want.update = nil
		s.c.metrics.observe(outcomeInPlace, elapsed)
		s.log.Info().Str("release", up.Release).Dur("took", elapsed).Msg("every node runs the new release; updated in place")
		if _, err := s.c.setImage(ctx, s.store); err != nil {
			return s.finish(ctx, metav1.ConditionFalse, ReasonUpdateFailed, err.Error(), 0)
		}
		return s.finish(ctx, metav1.ConditionTrue, ReasonUpdatedInPlace,
			fmt.Sprintf("every node runs %s, the release of %s, updated in place in %s", up.Release, s.store.Spec.Image, elapsed.Round(time.Second)), 0)
	}
	if elapsed > s.c.cfg.Timeout {
		behind := "the admin API did not answer: " + errString(reach)
		if reach == nil {
			behind = "nodes still on another release: " + strings.Join(s.behind(up.Release), ", ")
		}
		return s.rollBack(ctx, errorf(CauseNodesNotUpdated, "the in-place update to %s did not complete in %s (%s)",
			up.Release, s.c.cfg.Timeout, behind))
	}
	if reach == nil && s.now.Sub(up.LastCall.Time) > settle && up.Calls < maxCalls {
		if behind := s.behind(up.Release); len(behind) > 0 && len(behind) < len(s.nodes) && allOnline(s.nodes) {
			// Mixed releases: ask a node left behind, which pushes the
			// binary to the other nodes left behind.
			updateURL, err := s.c.updateURL(up.Release)
			if err != nil {
				return s.rollBack(ctx, newError(CauseBinaryUnavailable, err))
			}
			s.log.Warn().Str("release", up.Release).Strs("behind", behind).Msg("nodes run different releases; updating the ones left behind")
			return s.call(ctx, updateURL, behind[0])
		}
	}
	return s.finish(ctx, metav1.ConditionFalse, ReasonUpdatingInPlace,
		fmt.Sprintf("updating to %s in place (%d call(s) made; nodes not on it yet: %s)", up.Release, up.Calls, strings.Join(s.behind(up.Release), ", ")), s.c.cfg.Poll)
}

// rollBack falls back to a rolling update: the StatefulSets get spec.image
// and the statefulset controller replaces the pods. why is said in the
// condition and an Event.
func (s *syncState) rollBack(ctx context.Context, why error) error {
	var took time.Duration
	if up := s.store.Status.Update; up != nil {
		took = s.now.Sub(up.Started.Time)
	}
	s.want.update = nil
	msg := s.withRemedy(why)
	if paused := s.store.Annotations[v1.UpdatesPausedAnnotation] == "true"; paused && s.store.Status.Update == nil {
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdatesPaused, msg+"; updates are paused by the annotation "+v1.UpdatesPausedAnnotation, 0)
	}
	rolled, err := s.c.rollImage(ctx, s.store)
	if err != nil {
		s.c.metrics.observe(outcomeFailed, took)
		return s.finish(ctx, metav1.ConditionFalse, ReasonUpdateFailed, msg+"; the rolling update failed too: "+err.Error(), 0)
	}
	if len(rolled) > 0 || took > 0 {
		s.c.metrics.observe(outcomeRolling, took)
	}
	if len(rolled) > 0 {
		s.log.Warn().Str("reason", causeOf(why)).Strs("statefulsets", rolled).Str("image", s.store.Spec.Image).Err(why).
			Msg("falling back to a rolling update")
		msg = fmt.Sprintf("rolling update to %s (StatefulSets %s): %s", s.store.Spec.Image, strings.Join(rolled, ", "), msg)
	} else {
		msg = fmt.Sprintf("rolling update to %s: %s", s.store.Spec.Image, msg)
	}
	return s.finish(ctx, metav1.ConditionFalse, ReasonRollingUpdate, msg, s.c.cfg.Poll*5)
}

func (s *syncState) withRemedy(err error) string {
	msg := err.Error()
	if r := s.c.cfg.Remedy(causeOf(err)); r != "" {
		msg += ". " + strings.ToUpper(r[:1]) + r[1:]
	}
	return msg
}

// finish writes the status when it changed and requeues after again (0:
// no requeue).
func (s *syncState) finish(ctx context.Context, st metav1.ConditionStatus, reason, msg string, again time.Duration) error {
	if err := s.write(ctx, st, reason, msg); err != nil {
		return err
	}
	if again > 0 {
		s.c.queue.AddAfter(s.key, again)
	}
	return nil
}

func (s *syncState) write(ctx context.Context, st metav1.ConditionStatus, reason, msg string) error {
	before := s.have.cond
	s.want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: st, Reason: reason, Message: msg})
	if err := s.c.status.write(ctx, s.u, &s.have, s.want); err != nil {
		return err
	}
	if before == nil || before.Reason != reason || before.Status != st {
		ev := s.log.Info()
		if st != metav1.ConditionTrue && reason != ReasonUpdatingInPlace && reason != ReasonWaitingForBinary {
			ev = s.log.Warn()
		}
		ev.Str("reason", reason).Str("status", string(st)).Str("release", s.want.release).Msg(msg)
	}
	return nil
}

// behind lists the nodes not on release.
func (s *syncState) behind(release string) []string {
	var out []string
	for _, n := range s.nodes {
		if n.release != release {
			out = append(out, n.endpoint)
		}
	}
	return out
}

// updateURL is the .sha256sum URL MinIO is given: the top-level release
// when the store has one, else linux-amd64's.
func (c *Controller) updateURL(release string) (string, error) {
	name, err := binstore.BinaryName(release)
	if err != nil {
		return "", err
	}
	snap := c.cfg.Store.Current()
	base := strings.TrimSuffix(c.cfg.UpdateURL, "/")
	switch {
	case snap.Binary("", release) != nil:
		return base + "/" + name + binstore.SHA256SumSuffix, nil
	case snap.Binary(binstore.PlatformDir("linux", "amd64"), release) != nil:
		return base + "/" + binstore.PlatformDir("linux", "amd64") + "/" + name + binstore.SHA256SumSuffix, nil
	}
	return "", fmt.Errorf("%s is not in this replica's store for linux/amd64", name)
}

// serverInfo asks the tenant which release each node runs.
func (c *Controller) serverInfo(ctx context.Context, t *tenant) ([]node, error) {
	adm, tr, err := t.admin("")
	if err != nil {
		return nil, newError(CauseTenantUnreachable, err)
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := adm.ServerInfo(ctx)
	if err != nil {
		return nil, errorf(CauseTenantUnreachable, "MinIO admin API at %s: %s", t.endpoint.Redacted(), describeAdminError(err))
	}
	if len(info.Servers) == 0 {
		return nil, errorf(CauseTenantUnreachable, "MinIO admin API at %s reported no servers", t.endpoint.Redacted())
	}
	nodes := make([]node, 0, len(info.Servers))
	for _, srv := range info.Servers {
		n := node{endpoint: srv.Endpoint, online: srv.State == string(madmin.ItemOnline)}
		if n.online {
			if n.release, err = releaseOfVersion(srv.Version); err != nil {
				n.release = srv.Version
			}
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].endpoint < nodes[j].endpoint })
	return nodes, nil
}

// describeAdminError gives MinIO's own error text where there is one.
func describeAdminError(err error) string {
	if e := madmin.ToErrorResponse(err); e.Code != "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return err.Error()
}

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

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func allOn(nodes []node, release string) bool {
	if len(nodes) == 0 || release == "" {
		return false
	}
	for _, n := range nodes {
		if !n.online || n.release != release {
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
