// Package updates drives MinIO's in-place update. When an ObjectStore's
// image holds a newer release than its nodes run, and the binary source
// has that release in the store (verified and signed), the controller asks
// MinIO's admin API (ServerUpdateV2, what `mc admin update` calls) to fetch
// it from the upgrade server, checks that every node reports it, and sets
// the StatefulSets' image so pods that restart later keep it. Whatever
// fails, it falls back to a rolling update through the StatefulSets and
// says why in the VersionCurrent condition.
//
// A sync observes (observe), decides (decide, a pure function of the
// observation) and acts (act). The update in flight is recorded in the
// ObjectStore's status, against the live object's resourceVersion, before
// MinIO is called, so neither a lagging cache, nor an operator restart,
// nor a new leader ever calls twice.
package updates

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/window"
	objstatus "github.com/object-store-operator/operator/status"
)

// ServingCertificate is the upgrade server's current certificate.
type ServingCertificate interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Secrets reads a Secret with its data, kept while its resourceVersion
// stays (secretcache.Reader): no GET per sync. The Secret is shared: not
// to be modified.
type Secrets interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// adminAPI is the part of MinIO's admin API the controller calls.
type adminAPI interface {
	ServerInfo(ctx context.Context, opts ...func(*madmin.ServerInfoOpts)) (madmin.InfoMessage, error)
	ServerUpdateV2(ctx context.Context, opts madmin.ServerUpdateOpts) (madmin.ServerUpdateStatusV2, error)
}

// Config configures the controller.
type Config struct {
	// UpdateURL is the upgrade server's base as pods reach it (up to
	// /webhook/v1/update). status.binary.url is given to MinIO only below
	// it: the status subresource may be written by others than the binary
	// source, and MinIO is never sent elsewhere on their word.
	UpdateURL string
	// Kube patches StatefulSets.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Secrets reads the tenants' configuration and generated Secrets.
	Secrets Secrets
	// SecretsSynced tells when what Secrets reads from has synced.
	SecretsSynced cache.InformerSynced
	// SecretEvents, when set, is the informer behind Secrets: a change to
	// a configuration Secret queues the ObjectStores that name it, so a
	// fix (the credentials, config.env) is picked up within seconds, not
	// at the next resync.
	SecretEvents cache.SharedInformer
	// ObjectStores is a dynamic informer on v1.Resource; StatefulSets
	// lists the StatefulSets labelled v1.ObjectStoreLabel.
	ObjectStores cache.SharedIndexInformer
	StatefulSets appslisters.StatefulSetLister
	// SetsSynced tells when the StatefulSets' informer has synced.
	SetsSynced cache.InformerSynced
	// Platforms, when set, returns the platforms ("os/arch", sorted) the
	// ObjectStore's pods run on (placement.Source): more than one is
	// rolled, never updated in place. Unset or nil: none known.
	Platforms func(namespace, name string) []string
	// PlatformsSynced tells when what Platforms reads has synced.
	PlatformsSynced cache.InformerSynced
	// OnPlacementChange, when set, registers a handler for a change to
	// what Platforms answers for an ObjectStore
	// (placement.Source.OnChange).
	OnPlacementChange func(changed func(key string))
	// Serving is nil when the upgrade server speaks plain HTTP.
	Serving       ServingCertificate
	ClusterDomain string
	// AllowedEndpoints is what the admin client may reach beyond the
	// ObjectStore's own namespace's Services (see EndpointPolicy).
	AllowedEndpoints EndpointPolicy
	// Timeout bounds an update: from the first call until every node
	// reports the new release. Past it the controller rolls instead.
	Timeout time.Duration
	// Poll is how often an update in flight is looked at.
	Poll time.Duration
	// MaxPoll bounds the wait between looks at a tenant whose admin API
	// does not answer yet.
	MaxPoll time.Duration
	// CallsPerNamespace is how many update calls one namespace's
	// ObjectStores may have running at once.
	CallsPerNamespace int
	// MaxInFlight caps the in-place updates in flight fleet-wide, from
	// the recorded call until the update ends (0: no cap).
	MaxInFlight int
	// FailureBudget is how many namespaces' in-place updates to one
	// release may fail, with none succeeding, before updates to it halt
	// fleet-wide (0: no budget). The record is the Lease HaltRecordName
	// in HaltNamespace (the operator's namespace).
	FailureBudget int
	HaltNamespace string
	Recorder      record.EventRecorder
	// Reasons are this package's Reasons, their remedies spelled in the
	// user's words (reason.Spell); nil: no remedies, every Event a
	// Warning.
	Reasons    reason.Set
	Registerer prometheus.Registerer
	Clock      clock.PassiveClock
	Log        zerolog.Logger
	Workers    int
}

// Controller keeps every ObjectStore's nodes on the release of its image.
// Its Loop runs on every replica; only the leader's (see Lead) reconciles:
// calls MinIO and writes.
type Controller struct {
	cfg     Config
	log     zerolog.Logger
	loop    *controller.Loop[*v1.ObjectStore]
	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *metrics
	status  *objstatus.Writer
	calls   *calls
	fleet   *fleet
	halts   *halts
	// asking holds each namespace to CallsPerNamespace syncs at once: a
	// sync asks the tenant's admin API which release its nodes run, and an
	// endpoint that never answers holds the worker until its deadline.
	asking *calls
	// dial, when set, stands in for dialAdmin in tests.
	dial func(t *tenant, host string) (adminAPI, func(), error)
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

// New wires event handlers; call Run to work and Lead while leading.
func New(cfg Config) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Secrets == nil {
		return nil, errors.New("updates: no Secrets reader")
	}
	if cfg.Workers <= 0 || cfg.Timeout <= 0 || cfg.Poll <= 0 || cfg.MaxPoll <= 0 || cfg.CallsPerNamespace <= 0 {
		return nil, fmt.Errorf("updates: workers (%d), timeout (%s), poll (%s), max poll (%s) and calls per namespace (%d) must be positive",
			cfg.Workers, cfg.Timeout, cfg.Poll, cfg.MaxPoll, cfg.CallsPerNamespace)
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "updates").Logger(),
		metrics: newMetrics(cfg.Registerer),
		status:  &objstatus.Writer{Client: cfg.Dynamic, Manager: fieldManager, Recorder: cfg.Recorder, Clock: cfg.Clock, Reasons: cfg.Reasons},
	}
	var synced []cache.InformerSynced
	for _, s := range []cache.InformerSynced{cfg.SetsSynced, cfg.SecretsSynced, cfg.PlatformsSynced} {
		if s != nil {
			synced = append(synced, s)
		}
	}
	var err error
	c.loop, err = controller.NewLoop(controller.Options[*v1.ObjectStore]{
		Name: "updates", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Synced: synced, Workers: cfg.Workers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 2*time.Minute),
		// Spec changes, resyncs, the pause and resume annotations, and
		// what the binary source wrote in the status (status.binary,
		// BinaryAvailable): the one way it tells this controller anything.
		// Not other status writes (ours included).
		Changed: func(old, obj *unstructured.Unstructured) bool {
			return controller.SpecChangedOrResync(old, obj) ||
				old.GetAnnotations()[v1.UpdatesPausedAnnotation] != obj.GetAnnotations()[v1.UpdatesPausedAnnotation] ||
				old.GetAnnotations()[v1.ResumeUpdatesAnnotation] != obj.GetAnnotations()[v1.ResumeUpdatesAnnotation] ||
				binaryChanged(objstatus.ObjectStore(old), objstatus.ObjectStore(obj))
		},
		ReportPanic: c.reportPanic,
		OnError: func(key string, err error) {
			if apierrors.IsConflict(err) {
				// Another writer moved the object twice during one sync: an
				// ordinary race, looked at again with backoff.
				c.log.Info().Str("objectstore", key).Str("reason", "Conflict").Err(err).Msg("the ObjectStore changed during the sync; retrying")
				return
			}
			c.log.Error().Str("objectstore", key).Str("reason", reason.Of(err)).Err(err).Msg("update sync failed; retrying")
		},
		Registerer: cfg.Registerer, Log: cfg.Log,
	}, c)
	if err != nil {
		return nil, err
	}
	c.queue = c.loop.Queue()
	c.calls = newCalls(cfg.CallsPerNamespace, c.queue.Add)
	c.fleet = newFleet(cfg.MaxInFlight, cfg.FailureBudget > 0, cfg.ObjectStores.GetIndexer(), c.queue.Add)
	if cfg.FailureBudget > 0 {
		if cfg.HaltNamespace == "" || cfg.Kube == nil {
			return nil, errors.New("updates: a failure budget needs the namespace of its halt record and a client")
		}
		c.halts = newHalts(cfg.FailureBudget, cfg.Kube, cfg.HaltNamespace, cfg.Clock, cfg.Registerer)
	}
	c.asking = newCalls(cfg.CallsPerNamespace, c.queue.Add)
	if err := c.watchConfigurations(); err != nil {
		return nil, err
	}
	if cfg.OnPlacementChange != nil {
		// The platforms its pods run on may have changed.
		cfg.OnPlacementChange(c.queue.Add)
	}
	return c, nil
}

// configurationIndex files ObjectStores under the namespace/name of the
// configuration Secret they name.
const configurationIndex = "updates-configuration"

// watchConfigurations queues, on any change to a Secret, the ObjectStores
// whose spec.configuration names it: found through an index, never a
// scan of every ObjectStore per event.
func (c *Controller) watchConfigurations() error {
	if c.cfg.SecretEvents == nil {
		return nil
	}
	err := c.cfg.ObjectStores.AddIndexers(cache.Indexers{configurationIndex: v1.SecretIndex(func(s *v1.ObjectStore) []string {
		if s.Spec.Configuration == nil || s.Spec.Configuration.Name == "" {
			return nil
		}
		return []string{s.Spec.Configuration.Name}
	})})
	if err != nil {
		return fmt.Errorf("updates: index ObjectStores by configuration Secret: %w", err)
	}
	stores := c.cfg.ObjectStores.GetIndexer()
	changed := func(obj any) { controller.EnqueueReferrers(c.queue, stores, configurationIndex, obj) }
	_, err = c.cfg.SecretEvents.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, obj any) {
			// A resync of an unchanged Secret is not news: the ObjectStores'
			// own resync covers it.
			if o, n := controller.Unwrap(old), controller.Unwrap(obj); resourceVersion(o) != resourceVersion(n) {
				changed(obj)
			}
		},
		DeleteFunc: changed,
	})
	if err != nil {
		return fmt.Errorf("updates: watch configuration Secrets: %w", err)
	}
	return nil
}

func resourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// NeedLeaderElection is true: only the leader calls MinIO and writes.
func (c *Controller) NeedLeaderElection() bool { return true }

// Run acts until ctx (the leadership term) ends; a sync or call in flight
// when the term ends is cancelled with it. A new term reads the halt
// record afresh.
func (c *Controller) Run(ctx context.Context) error {
	c.halts.lead()
	return c.loop.Run(ctx)
}

// reportPanic sets VersionCurrent Unknown, reason InternalError: whether
// the nodes run the release is not known.
func (c *Controller) reportPanic(ctx context.Context, u *unstructured.Unstructured, message string) {
	// An object that does not convert has an empty spec here (binsource
	// reports it).
	store := objstatus.ObjectStore(u)
	have := statusOf(store)
	want := have
	want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: metav1.ConditionUnknown,
		Reason: controller.ReasonInternalError, Message: message}, c.cfg.Clock.Now())
	// Whatever the cache holds: a panic has no decision to make again.
	_ = c.apply(ctx, store, have, want, "", false)
}

// node is one MinIO server as its admin API reports it.
type node struct {
	endpoint string // host:port
	online   bool
	release  string
}

func (c *Controller) params() params {
	return params{timeout: c.cfg.Timeout, poll: c.cfg.Poll, maxPoll: c.cfg.MaxPoll, maxInFlight: c.cfg.MaxInFlight, budget: c.cfg.FailureBudget}
}

// Forget drops a deleted ObjectStore's call slots and its place in the
// fleet's updates.
func (c *Controller) Forget(key string) {
	c.calls.forget(key)
	c.asking.forget(key)
	c.fleet.forget(key)
}

// Reconcile brings the ObjectStore's nodes to the release of its image, in
// place when it can, through its StatefulSets when it cannot. What does
// not convert is binsource's to report.
func (c *Controller) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (controller.Result, error) {
	return controller.Result{}, c.reconcile(ctx, store, u)
}

func (c *Controller) reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) error {
	key := store.Namespace + "/" + store.Name
	if store.Spec.Image == "" {
		c.fleet.unwait(key)
		return nil
	}
	// One namespace's silent endpoints hold at most its share of the
	// workers; the key is queued again when one of its syncs ends.
	if !c.asking.reserve(key, store.Namespace) {
		return nil
	}
	defer c.asking.release(key)
	o, t := c.observe(ctx, key, store)
	a := decide(o, c.params())
	if a.verb == call || a.verb == roll || (a.verb == setImage && o.recorded != nil) {
		// The cache may lag the status this controller wrote: decide again
		// on the live object before anything is called, rolled, or an
		// update ended. What follows these is written whatever the object
		// became, so a cache behind the end of an update would end it again
		// (its outcome counted twice, its Event repeated, what it took
		// rewritten). Rolls and ends are once an update: a read each.
		live, err := c.live(ctx, key, store, "before "+a.verb.String())
		if live == nil || err != nil {
			return err
		}
		if live.GetResourceVersion() != u.GetResourceVersion() {
			if store, err = v1.FromUnstructured(live); err != nil || store.Spec.Image == "" {
				c.fleet.unwait(key)
				return nil
			}
			u = live
			o, t = c.observe(ctx, key, store)
			a = decide(o, c.params())
		}
	}
	err := c.act(ctx, key, u, store, o, t, a)
	if !apierrors.IsConflict(err) || a.verb == call {
		return err
	}
	// The status write was refused: the decision was made on a cache
	// behind the object (most often behind this controller's own last
	// write, such as a rolling update it just reported). Decide once more
	// on the live object rather than undo that write.
	live, err := c.live(ctx, key, store, "after a conflicting status write")
	if live == nil || err != nil {
		return err
	}
	if store, err = v1.FromUnstructured(live); err != nil || store.Spec.Image == "" {
		// Gone from under the sync (or no longer convertible): nothing
		// to update, as at the start of a sync.
		c.fleet.unwait(key)
		return nil
	}
	o, t = c.observe(ctx, key, store)
	return c.act(ctx, key, live, store, o, t, decide(o, c.params()))
}

// live reads the ObjectStore from the apiserver; nil without an error
// when it is gone.
func (c *Controller) live(ctx context.Context, key string, store *v1.ObjectStore, why string) (*unstructured.Unstructured, error) {
	live, err := c.cfg.Dynamic.Resource(v1.Resource).Namespace(store.Namespace).Get(ctx, store.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read ObjectStore %s %s: %w", key, why, err)
	}
	return live, nil
}

// observe reads what decide needs: the status, the store's resolution of
// the image, the tenant's nodes, its StatefulSets and this process's call.
func (c *Controller) observe(ctx context.Context, key string, store *v1.ObjectStore) (observation, *tenant) {
	st := statusOf(store)
	o := observation{now: c.cfg.Clock.Now(), namespace: store.Namespace, image: store.Spec.Image, recorded: store.Status.Update, prev: st.cond,
		paused: store.Annotations[v1.UpdatesPausedAnnotation] == "true", call: c.calls.state(key)}
	var bin *v1.BinaryStatus
	o.binary, bin = binaryOf(store)
	t, reach := c.loadTenant(ctx, store)
	if reach == nil {
		o.nodes, reach = c.serverInfo(ctx, t)
	}
	o.reach = reach
	o.sets = c.setsOf(store)
	if c.cfg.Platforms != nil {
		o.platforms = c.cfg.Platforms(store.Namespace, store.Name)
	}
	release := o.binary.release
	if o.recorded != nil {
		release = o.recorded.Release
	}
	if release != "" {
		o.updateURL, o.urlErr = updateURL(c.cfg.UpdateURL, store.Spec.Image, bin, release)
		if o.urlErr == nil && t != nil {
			o.trustErr = c.preflight(t.roots, o.updateURL, o.now)
		}
	}
	c.observeFleet(ctx, key, store, &o)
	return o, t
}

// observeFleet reads what holds an update back before it starts: the
// tenant's window, the failure budget of the release, and the fleet's
// updates in flight. None of it matters to an update already recorded,
// nor to a tenant whose nodes already run the release.
func (c *Controller) observeFleet(ctx context.Context, key string, store *v1.ObjectStore, o *observation) {
	if w := store.Spec.Updates.Window; w != nil {
		o.window = &window.Spec{Schedule: w.Schedule, Duration: w.Duration}
	}
	b := o.binary
	if o.recorded != nil || !b.resolved || !b.available || (o.reach == nil && allOn(o.nodes, b.release)) {
		return
	}
	o.resumed = store.Annotations[v1.ResumeUpdatesAnnotation]
	o.halt, o.haltErr = c.halts.state(ctx, b.release)
	o.inFlight = c.fleet.inFlight(key)
}

// act does what decide chose and writes the status it leads to.
func (c *Controller) act(ctx context.Context, key string, u *unstructured.Unstructured, store *v1.ObjectStore, o observation, t *tenant, a action) error {
	if a.verb == retry {
		if o.reach == nil && o.call.result != nil {
			// The call panicked (decide): hand the panic to the worker once.
			c.calls.consume(key)
			return o.call.result.err
		}
		if o.reach == nil {
			return o.haltErr
		}
		return o.reach
	}
	log := c.log.With().Str("objectstore", key).Logger()
	msg := a.message
	if a.cause != "" {
		msg = c.withRemedy(msg, a.cause)
	}
	switch a.verb {
	case setImage:
		if _, err := c.setImage(ctx, store); err != nil {
			a = action{verb: report, status: metav1.ConditionFalse, reason: ReasonUpdateFailed, update: a.update, outcome: a.outcome, took: a.took}
			msg = err.Error()
		}
	case roll:
		rolled, err := c.rollImage(ctx, store)
		switch {
		case err != nil:
			a.reason, a.outcome, a.after = ReasonUpdateFailed, outcomeFailed, 0
			msg = objstatus.Clauses(msg, "the rolling update failed too: "+err.Error())
		case len(rolled) > 0:
			log.Warn().Str("reason", a.cause).Strs("statefulsets", rolled).Str("image", store.Spec.Image).Str("why", a.message).
				Msg("falling back to a rolling update")
			msg = fmt.Sprintf("rolling update to %s (StatefulSets %s): %s", store.Spec.Image, strings.Join(rolled, ", "), msg)
		default:
			if a.took == 0 {
				a.outcome = "" // nothing rolled, no update ended: not an outcome
			}
			msg = fmt.Sprintf("rolling update to %s: %s", store.Spec.Image, msg)
		}
	case call:
		return c.startCall(ctx, key, u, store, o, t, a, msg)
	}
	release := ""
	if o.reach == nil {
		release = oldest(o.nodes)
	}
	// A report changes nothing but the status, so it is written only over
	// the object it was decided on: a cache behind this controller's own
	// last write (a rolling update it just reported, say) gets a conflict
	// and reconcile decides again on the live object, instead of undoing
	// that write. What follows a change to the StatefulSets is written
	// whatever the object became since: the change is made.
	rv := ""
	if a.verb == report {
		rv = u.GetResourceVersion()
	}
	if err := c.write(ctx, store, rv, release, a.update, phaseOf(o, a), a.status, a.reason, msg); err != nil {
		return err
	}
	if o.call.result != nil {
		c.calls.consume(key)
	}
	if a.outcome != "" {
		c.metrics.observe(a.outcome, a.took)
	}
	if a.reason == ReasonUpdateQueued {
		c.fleet.wait(key)
	} else {
		c.fleet.unwait(key)
	}
	if o.recorded != nil && a.update == nil {
		// Counted before the place in flight is given back: a worker
		// reserving in between sees the update either in flight or
		// failed, never neither (fleet.reserve reads the count afresh).
		c.budget(ctx, key, u, o, a, msg)
	}
	if a.update == nil && (o.recorded != nil || c.fleet.holds(key)) {
		// The update ended (a cache that lags the record sees it end as
		// Current, with nothing recorded).
		c.fleet.end(key)
	}
	if a.verb == setImage && a.reason == ReasonUpdatedInPlace {
		log.Info().Str("release", o.binary.release).Stringer("took", a.took).Msg("every node runs the new release; updated in place")
	}
	if a.after > 0 {
		c.queue.AddAfter(key, a.after)
	}
	return nil
}

// startCall records the call in the status, conditional on the object
// being what was observed (its resourceVersion), and then makes it beside
// the queue, on one of the namespace's call slots. A conflict means the
// object changed since: nothing is called, and the next sync looks again.
func (c *Controller) startCall(ctx context.Context, key string, u *unstructured.Unstructured, store *v1.ObjectStore, o observation, t *tenant, a action, msg string) error {
	if !c.calls.reserve(key, store.Namespace) {
		// Queued again when a call of the namespace ends.
		return c.write(ctx, store, "", oldest(o.nodes), o.recorded, "Queued", metav1.ConditionFalse, ReasonUpdateQueued,
			fmt.Sprintf("waiting to update to %s: namespace %s has %d update call(s) running, the most it may have at once",
				a.update.Release, store.Namespace, c.cfg.CallsPerNamespace))
	}
	// The fleet's place is taken before the record, and given back when
	// the record is not written: decide saw the count, this holds it
	// against another worker deciding at the same moment.
	first := func() (int, []string) {
		// What the budget says now, not when the sync observed it: a
		// failure counted since frees a place in flight but not a first.
		o := o
		o.halt = c.halts.cached(a.update.Release, o.halt)
		return firstLimit(o, c.params()), o.halt.failedNS
	}
	ok, share := true, ""
	if o.recorded == nil {
		ok, share = c.fleet.reserve(key, a.update.Release, first)
	}
	if !ok {
		c.calls.release(key)
		// Said as decide would have said it, had it seen this moment.
		o.inFlight = c.fleet.inFlight(key)
		q := gate(o, c.params(), action{verb: call})
		switch {
		case q.reason == ReasonUpdateQueued:
		case share != "":
			q.message = fmt.Sprintf("waiting to update to %s: %s", a.update.Release, share)
		default:
			q.message = fmt.Sprintf("waiting to update to %s: another update started a moment ago", a.update.Release)
		}
		return c.write(ctx, store, "", oldest(o.nodes), nil, "Queued", metav1.ConditionFalse, ReasonUpdateQueued, q.message)
	}
	have := statusOf(store)
	want := have
	want.release, want.update, want.phase = oldest(o.nodes), a.update, phaseOf(o, a)
	want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: a.status, Reason: a.reason, Message: msg}, o.now)
	if err := c.apply(ctx, store, have, want, u.GetResourceVersion(), true); err != nil {
		c.calls.release(key)
		if o.recorded == nil {
			c.fleet.end(key)
		}
		if apierrors.IsConflict(err) {
			c.log.Info().Str("objectstore", key).Msg("the ObjectStore changed before the update call was recorded; looking again, nothing called")
		}
		return err
	}
	if o.call.result != nil {
		c.calls.consume(key)
	}
	up := *a.update
	c.log.Info().Str("objectstore", key).Str("release", up.Release).Str("url", o.updateURL).Str("node", a.host).Int("call", up.Calls).
		Msg("updating MinIO in place")
	c.calls.start(ctx, key, func(ctx context.Context) callResult {
		return c.callOnce(ctx, t, o.updateURL, a.host, up.Release)
	})
	return nil
}

// budget counts the end of a recorded update against its release's
// failure budget (halt.go says what counts), or clears the release's
// failures on a success. The ObjectStore whose failure spends the budget
// gets a Warning Event saying the fleet's updates to the release halted.
func (c *Controller) budget(ctx context.Context, key string, u *unstructured.Unstructured, o observation, a action, msg string) {
	if c.halts == nil {
		return
	}
	release := o.recorded.Release
	log := c.log.With().Str("objectstore", key).Str("release", release).Logger()
	switch {
	case a.verb == setImage && a.reason == ReasonUpdatedInPlace:
		if err := c.halts.succeed(ctx, key, release); err != nil {
			log.Error().Err(err).Str("reason", ReasonUpdatesHalted).Msg("could not clear the release's update failures")
		}
	case (a.outcome == outcomeRolling || a.outcome == outcomeFailed) && (a.cause == CauseInPlaceRefused || a.cause == CauseNodesNotUpdated):
		halted, st, err := c.halts.fail(ctx, key, release, a.cause, a.message)
		if err != nil {
			// The failure goes uncounted; the update itself is reported.
			log.Error().Err(err).Str("reason", ReasonUpdatesHalted).Msg("could not record a failed update in the halt record")
			return
		}
		if halted {
			text := func(failures string) string {
				return fmt.Sprintf("in-place updates to %s failed in %d namespaces with none succeeding (%s); no update to it starts anywhere until the halt record %s/%s is deleted",
					release, c.cfg.FailureBudget, failures, c.cfg.HaltNamespace, HaltRecordName)
			}
			// The platform's log names every failure; the tenant's Event
			// quotes its own only (describeFailuresFor).
			log.Warn().Str("reason", ReasonUpdatesHalted).Msg(text(describeFailures(st.list)))
			if c.cfg.Recorder != nil {
				c.cfg.Recorder.Event(u, corev1.EventTypeWarning, ReasonUpdatesHalted,
					objstatus.BoundMessage(text(describeFailuresFor(st.list, u.GetNamespace()))))
			}
		}
	}
}

// callOnce makes one ServerUpdateV2 call through host and sorts the
// per-node results: failures as "node <host>: <MinIO's error>", how many of
// them are a damaged download, and how many nodes updated.
func (c *Controller) callOnce(ctx context.Context, t *tenant, updateURL, host, release string) callResult {
	adm, done, err := c.dialAdmin(t, host)
	if err != nil {
		return callResult{err: reason.Wrap(CauseTenantUnreachable, err)}
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	result, err := adm.ServerUpdateV2(ctx, madmin.ServerUpdateOpts{UpdateURL: updateURL})
	if err != nil {
		switch {
		case strings.Contains(err.Error(), updateInProgress):
			// A call of ours is being answered by MinIO already: follow it.
			return callResult{}
		case reason.Of(err) == "" && madmin.ToErrorResponse(err).Code == "" && ctx.Err() == nil:
			// No answer of MinIO's, refusing or not: the connection broke
			// (a node re-executes as the new release as soon as every node
			// has it, and can drop the answer with it). The nodes may be
			// updating: follow the recorded update, done when every node
			// reports the release, rolled past the update's timeout.
			c.log.Warn().Str("release", release).Str("node", host).Err(err).Msg("the update call got no answer; following the nodes")
			return callResult{}
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
		return callResult{err: reason.Errorf(CauseInPlaceRefused, "MinIO at %s refused the in-place update to %s: %w", node, release, adminError(err))}
	}
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
	if len(r.failed) > 0 && len(r.failed) != r.transient {
		c.log.Warn().Str("release", release).Strs("failed", r.failed).Msg("some nodes did not update")
	}
	return r
}

// serverInfoTimeout bounds asking a tenant which release its nodes run:
// MinIO answers in milliseconds; a sync holds a worker while it waits.
const serverInfoTimeout = 10 * time.Second

// updateInProgress is what MinIO answers a call that arrives while it is
// still verifying or installing the binary of another.
const updateInProgress = "update already in progress"

// failedHost is the host of a "node <host>: <error>" failure.
func failedHost(failure string) string {
	h, _, _ := strings.Cut(strings.TrimPrefix(failure, "node "), ": ")
	return h
}

func (c *Controller) withRemedy(msg, cause string) string {
	return objstatus.Sentences(msg, c.cfg.Reasons.Remedy(cause))
}

// write applies the status when it changed, logging a change of reason;
// conditional on resourceVersion when it is set (a conflict when the
// object changed since).
func (c *Controller) write(ctx context.Context, store *v1.ObjectStore, resourceVersion, release string, update *v1.UpdateStatus,
	phase string, st metav1.ConditionStatus, reason, msg string) error {
	have := statusOf(store)
	want := have
	if release != "" {
		want.release = release
	}
	want.update, want.phase = update, phase
	want.setCondition(metav1.Condition{Type: v1.ConditionVersionCurrent, Status: st, Reason: reason, Message: msg}, c.cfg.Clock.Now())
	before := have.cond
	if err := c.apply(ctx, store, have, want, resourceVersion, false); err != nil {
		return err
	}
	if before == nil || before.Reason != reason || before.Status != st {
		ev := c.log.Info()
		if st != metav1.ConditionTrue && reason != ReasonUpdatingInPlace && reason != ReasonWaitingForBinary && reason != ReasonUpdateQueued &&
			reason != ReasonOutsideWindow {
			ev = c.log.Warn()
		}
		ev.Str("objectstore", store.Namespace+"/"+store.Name).Str("reason", reason).Str("status", string(st)).Str("release", want.release).Msg(msg)
	}
	return nil
}

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

// adminError words err with MinIO's own error code and message where
// there is one (bounded by the transport, see limitedBodies); otherwise
// it is err itself, whose cause, such as an endpoint refused at dial
// time, then stays visible to causeOf.
func adminError(err error) error {
	if e := madmin.ToErrorResponse(err); e.Code != "" {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
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
