// Package updates drives MinIO's in-place update. When an ObjectStore's
// image holds a newer release than its nodes run, and the binary source
// has that release in the store (verified and signed), the controller asks
// MinIO's admin API (ServerUpdateV2, what `mc admin update` calls) to fetch
// it from the upgrade server, checks that every node reports it, and sets
// the StatefulSets' image so pods that restart later keep it. A dry run
// (every node fetches and verifies the binary, nothing restarts) comes
// before the real call. Whatever else fails, it falls back to a rolling
// update through the StatefulSets (or, with the fallback None, stops)
// and says why in the VersionCurrent condition.
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
	"time"

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

// Config configures the controller.
type Config struct {
	// UpdateURL is the upgrade server's base as pods reach it (up to
	// /webhook/v1/update). status.binary.url is given to MinIO only below
	// it: the status subresource may be written by others than the binary
	// source, and MinIO is never sent elsewhere on their word.
	UpdateURL string
	// Kube patches StatefulSets, and reads the Service, EndpointSlices
	// and Pods an admin endpoint of the namespace rule leads to.
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
	// CallsPerNamespace is how many update calls one unit's (UnitOf)
	// ObjectStores may have running at once; so named from when the
	// unit was always the namespace.
	CallsPerNamespace int
	// MaxInFlight caps the in-place updates in flight fleet-wide, from
	// the recorded call until the update ends (0: no cap).
	MaxInFlight int
	// FailureBudget is how many units' (UnitOf) in-place updates to one
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
	// SyncsPerTenant bounds how many of one tenant's ObjectStores are
	// synced at once (0: no bound beyond Workers).
	SyncsPerTenant int
	// Fallback is what follows an in-place update that cannot be made or
	// failed, for an ObjectStore whose spec.updates.fallback is unset:
	// v1.FallbackRolling or v1.FallbackNone (empty: Rolling, the one
	// fallback there was before the setting).
	Fallback string
	// UnitOf names the unit an ObjectStore key (namespace/name) counts
	// against in every share and budget (tenant.Resolver.Unit): the
	// update call slots, the syncs asking MinIO its release, the fleet's
	// places in flight and the failure budget. nil: its namespace.
	UnitOf func(key string) string
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
	// asking holds each unit to CallsPerNamespace syncs at once: a
	// sync asks the tenant's admin API which release its nodes run, and an
	// endpoint that never answers holds the worker until its deadline.
	asking *calls
	// dial, when set, stands in for dialAdmin in tests.
	dial func(t *tenant, host string) (adminAPI, func(), error)
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
	if f := cfg.Fallback; f != "" && f != v1.FallbackRolling && f != v1.FallbackNone {
		return nil, fmt.Errorf("updates: fallback %q is neither %s nor %s", f, v1.FallbackRolling, v1.FallbackNone)
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
		Name: "updates", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Synced: synced, Workers: cfg.Workers, PerUnit: cfg.SyncsPerTenant, UnitOf: cfg.UnitOf,
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
	c.fleet = newFleet(cfg.MaxInFlight, cfg.FailureBudget > 0, cfg.ObjectStores.GetIndexer(), cfg.UnitOf, c.queue.Add)
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
	if !cache.WaitForCacheSync(ctx.Done(), c.loop.HasSynced) {
		return nil
	}
	c.lead()
	return c.loop.Run(ctx)
}

// lead begins a leadership term, the caches synced: the halt record is
// read afresh and the updates in flight are counted from the status
// (fleet.adopt).
func (c *Controller) lead() {
	c.halts.lead()
	c.fleet.adopt()
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

// unitOf names the unit key counts against (Config.UnitOf).
func (c *Controller) unitOf(key string) string { return unitOf(c.cfg.UnitOf, key) }

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

// drop ends the update recorded for an ObjectStore whose spec.image is
// gone: there is nothing to update to, and a record left would hold a
// place in flight across the fleet (and the tenant's rollout) for ever.
// Nothing is counted against the release.
func (c *Controller) drop(ctx context.Context, key string, store *v1.ObjectStore) error {
	if store.Status.Update == nil {
		return nil
	}
	have := statusOf(store)
	want := have
	want.update, want.phase = nil, ""
	if err := c.apply(ctx, store, have, want, store.ResourceVersion, false); err != nil {
		return err
	}
	c.fleet.end(key)
	c.log.Info().Str("objectstore", key).Str("release", store.Status.Update.Release).Str("reason", ReasonImageRemoved).
		Msg("update ended: spec.image was removed")
	return nil
}

func (c *Controller) reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) error {
	key := store.Namespace + "/" + store.Name
	if store.Spec.Image == "" {
		c.fleet.unwait(key)
		return c.drop(ctx, key, store)
	}
	// One unit's silent endpoints hold at most its share of the workers;
	// the key is queued again when one of its syncs ends.
	if !c.asking.reserve(key, c.unitOf(key)) {
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
