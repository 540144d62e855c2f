// Package mountsecret keeps, for every ObjectStore, the Secret
// <name>-generated that holds all certificates its pods mount, and rolls
// the pods when that content changes or the Secret had to be recreated.
//
// It follows kubernetes/sample-controller: event handlers only enqueue
// ObjectStore keys, and one idempotent, level-based sync reads the world
// from listers and writes only the difference. Its informers and queue
// live as long as the process, on every replica; only the leader's syncs
// act (Lead).
//
// Secrets are watched as metadata only: the data of the Secrets
// ObjectStores reference is read on demand and kept (secretcache.Reader), so the
// operator's memory does not grow with the cluster's other Secrets.
package mountsecret

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/secretcache"
	"github.com/object-store-operator/operator/status"
)

// Annotations the controller writes.
const (
	// HashAnnotation on the generated Secret is the SHA-256 of its content.
	HashAnnotation = "aistor.min.io/content-hash"
	// SourcesAnnotation on the generated Secret records each input's digest.
	SourcesAnnotation = "aistor.min.io/sources"
	// RestartAnnotation on a StatefulSet's pod template changes whenever
	// the pods must restart to see new certificates.
	RestartAnnotation = "aistor.min.io/certs-restart"
)

const secretRefIndex = "secretRef"

// CABundleSource provides the CA pods need to trust the upgrade server.
type CABundleSource interface {
	CABundle() []byte
	Changed() <-chan struct{}
	// Loaded is false until a serving certificate is loaded; until then
	// CABundle says nothing about what pods must trust.
	Loaded() bool
}

// Config configures the controller.
type Config struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Secrets is a metadata-only informer (PartialObjectMetadata, see
	// secretcache.TrimMetadata) over every namespace the controller works in;
	// data is read through Kube when a sync needs it. StatefulSets needs
	// only those labelled v1.ObjectStoreLabel. ObjectStores is a dynamic
	// informer on v1.Resource.
	Secrets cache.SharedIndexInformer
	// Reader reads Secrets' data over Secrets' indexer; nil: one of the
	// controller's own, tracking ObjectStores. Pass one shared with the
	// other controllers that read referenced Secrets, so each version is
	// fetched once, tracking ObjectStores (secretcache.Reader.Track) so it
	// keeps only what they reference.
	Reader       *secretcache.Reader
	StatefulSets appsinformers.StatefulSetInformer
	ObjectStores cache.SharedIndexInformer
	// OperatorCA may be nil (plain HTTP): then no operator CA is added.
	OperatorCA CABundleSource
	Recorder   record.EventRecorder
	Log        zerolog.Logger
	// Metrics nil: not exported.
	Metrics *Metrics
	// Registerer takes the count of recovered panics (nil: not exported).
	Registerer prometheus.Registerer
	Workers    int
	// Reasons are this package's Reasons, their remedies spelled in the
	// user's words (reason.Spell); nil: every Event a Warning.
	Reasons reason.Set
	// MaxConcurrentRestarts is how many tenants may restart their pods
	// for new certificates at once (0: no limit); RestartTimeout is how
	// long one tenant's restart holds its slot at most.
	MaxConcurrentRestarts int
	RestartTimeout        time.Duration
	Clock                 clock.PassiveClock
}

// Metrics are the mount-secret controller's Prometheus metrics.
type Metrics struct {
	writes  *prometheus.CounterVec
	rebuild prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_mountsecret_writes_total",
			Help: "API writes by the mount-secret controller, by kind (secret_create, secret_update, statefulset_patch, status_update).",
		}, []string{"kind"}),
		rebuild: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_mountsecret_rebuilds_total",
			Help: "Generated Secrets created or rewritten.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.rebuild)
	}
	// Every kind is a series from the start, so a dashboard's rate of
	// restarts (statefulset_patch) reads 0 before the first one.
	for _, kind := range []string{"secret_create", "secret_update", "statefulset_patch", "status_update"} {
		m.writes.WithLabelValues(kind)
	}
	return m
}

// Controller is the mount-secret controller.
type Controller struct {
	cfg     Config
	log     zerolog.Logger
	loop    *controller.Loop[*v1.ObjectStore]
	secrets *secretcache.Reader
	sets    appslisters.StatefulSetLister
	stores  cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	writes  *prometheus.CounterVec
	rebuild prometheus.Counter
	// caLoaded is closed once the operator CA is known (at once without
	// one): the first rebuild waits for it.
	caLoaded chan struct{}
	caOnce   sync.Once
	status   *status.Writer
	restarts *restarts
}

// NewSecretReader is a secretcache.Reader whose metadata view carries this
// controller's digest of a generated Secret's data.
func NewSecretReader(meta cache.Indexer, kube kubernetes.Interface) *secretcache.Reader {
	return secretcache.NewReader(meta, kube, contentHash)
}

// FieldManager owns the CertificatesReady condition.
const FieldManager = "object-store-operator-mountsecret"

// New wires the controller's event handlers; call Run to work.
func New(cfg Config) (*Controller, error) {
	if cfg.Reader == nil {
		cfg.Reader = NewSecretReader(cfg.Secrets.GetIndexer(), cfg.Kube)
		if err := cfg.Reader.Track(cfg.ObjectStores, v1.SecretIndex((*v1.ObjectStore).SecretsRead)); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Log.With().Str("component", "mountsecret").Logger(),
		secrets:  cfg.Reader,
		sets:     cfg.StatefulSets.Lister(),
		stores:   cfg.ObjectStores.GetIndexer(),
		writes:   cfg.Metrics.writes,
		rebuild:  cfg.Metrics.rebuild,
		caLoaded: make(chan struct{}),
		status:   &status.Writer{Client: cfg.Dynamic, Manager: FieldManager, Recorder: cfg.Recorder, Reasons: cfg.Reasons},
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OperatorCA == nil {
		c.caOnce.Do(func() { close(c.caLoaded) })
	}
	if err := cfg.ObjectStores.AddIndexers(cache.Indexers{secretRefIndex: v1.SecretIndex((*v1.ObjectStore).ReferencedSecrets)}); err != nil {
		return nil, fmt.Errorf("index ObjectStores by Secret: %w", err)
	}
	var err error
	c.loop, err = controller.NewLoop(controller.Options[*v1.ObjectStore]{
		Name: "mountsecret", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Workers: cfg.Workers,
		// client-go's: per key from 5 ms doubling to 1000 s, 10 per second
		// overall.
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
		Synced:      []cache.InformerSynced{cfg.Secrets.HasSynced, cfg.StatefulSets.Informer().HasSynced},
		// Every update, status writes included: a CertificatesReady
		// edited or dropped by another writer is put back (a sync writes
		// only a difference).
		Changed: func(_, _ *unstructured.Unstructured) bool { return true },
		ReportPanic: func(ctx context.Context, u *unstructured.Unstructured, message string) {
			// A failure to write is in the log already through the panic's line.
			_, _ = c.status.SetCondition(ctx, u, metav1.Condition{Type: v1.ConditionCertificatesReady,
				Status: metav1.ConditionFalse, Reason: controller.ReasonInternalError, Message: message})
		},
		OnError: func(key string, err error) {
			c.log.Warn().Str("objectstore", key).Err(err).Msg("sync failed; retrying with backoff")
		},
		Registerer: cfg.Registerer, Log: cfg.Log,
	}, c)
	if err != nil {
		return nil, err
	}
	c.queue = c.loop.Queue()
	c.restarts = newRestarts(cfg.MaxConcurrentRestarts, cfg.RestartTimeout, cfg.Clock, c.queue.Add)
	handlers := []struct {
		informer cache.SharedInformer
		h        cache.ResourceEventHandler
	}{
		{cfg.Secrets, cache.ResourceEventHandlerFuncs{
			AddFunc: c.secretChanged,
			UpdateFunc: func(old, obj any) {
				// A resync of an unchanged Secret is not news.
				if resourceVersion(old) != resourceVersion(obj) {
					c.secretChanged(obj)
				}
			},
			DeleteFunc: func(obj any) {
				if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
					c.secrets.Forget(key)
				}
				c.secretChanged(obj)
			},
		}},
		{cfg.StatefulSets.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.statefulSetChanged,
			UpdateFunc: func(_, obj any) { c.statefulSetChanged(obj) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("mount-secret event handler: %w", err)
		}
	}
	return c, nil
}

func resourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

func (c *Controller) secretChanged(obj any) {
	controller.EnqueueReferrers(c.queue, c.stores, secretRefIndex, obj)
	obj = controller.Unwrap(obj)
	s, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	// The generated Secret itself: deleted or edited by hand.
	if ref := metav1.GetControllerOf(s); ref != nil && ref.Kind == v1.Kind && strings.HasPrefix(ref.APIVersion, v1.GroupVersion.Group+"/") {
		c.queue.Add(s.GetNamespace() + "/" + ref.Name)
	}
}

func (c *Controller) statefulSetChanged(obj any) {
	if s, ok := obj.(*appsv1.StatefulSet); ok {
		if name := objectStoreOf(s); name != "" {
			c.queue.Add(s.Namespace + "/" + name)
		}
	}
}

// objectStoreOf names the ObjectStore a labelled StatefulSet belongs to.
func objectStoreOf(s *appsv1.StatefulSet) string {
	// A long name does not fit the label; the annotation has it whole.
	if name := s.Annotations[v1.ObjectStoreNameAnnotation]; name != "" {
		return name
	}
	return s.Labels[v1.ObjectStoreLabel]
}

// NeedLeaderElection is true: only the leader writes Secrets and rolls
// StatefulSets.
func (c *Controller) NeedLeaderElection() bool { return true }

// Run acts until ctx (the leadership term) ends: once the caches synced
// and the serving certificate is loaded, it counts the restarts a
// previous leader left in flight and looks at every ObjectStore. Changes
// of the operator CA re-sync every store.
func (c *Controller) Run(ctx context.Context) error {
	if ca := c.cfg.OperatorCA; ca != nil {
		// The one reader of ca.Changed() during the term.
		go func() {
			for {
				if ca.Loaded() {
					c.caOnce.Do(func() { close(c.caLoaded) })
				}
				select {
				case <-ctx.Done():
					return
				case <-ca.Changed():
					c.loop.EnqueueAll()
				}
			}
		}()
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.loop.HasSynced) || !c.waitForCA(ctx) {
		return nil
	}
	c.adoptRestarts()
	c.log.Info().Int("objectStores", len(c.stores.ListKeys())).Msg("mount-secret controller started")
	return c.loop.Run(ctx)
}

// waitForCA holds a term until the serving certificate is loaded: a
// rebuild before it would drop CAs.operator.crt from every generated
// Secret and roll every tenant, twice (autocert's cold start, a custom
// Secret briefly missing). It returns false when ctx ended first.
func (c *Controller) waitForCA(ctx context.Context) bool {
	select {
	case <-c.caLoaded:
		return true
	default:
	}
	c.log.Info().Msg("waiting for the serving certificate before the first rebuild: its CA goes into every generated Secret")
	select {
	case <-ctx.Done():
		return false
	case <-c.caLoaded:
		return true
	}
}

// adoptRestarts counts, at the start of a term, the tenants a previous
// leader restarted whose rollout has not finished yet: they hold slots.
func (c *Controller) adoptRestarts() {
	c.restarts.reset()
	sets, err := c.sets.List(labels.Everything()) // the informer holds only labelled StatefulSets
	if err != nil {
		return
	}
	for _, s := range sets {
		if s.Spec.Template.Annotations[RestartAnnotation] == "" || !rolling(s) {
			continue
		}
		if name := objectStoreOf(s); name != "" {
			key := s.Namespace + "/" + name
			c.restarts.adopt(key)
			// Nothing else may sync key again (pods that never get
			// ready, a name no ObjectStore has): the timeout must.
			if c.restarts.timeout > 0 {
				c.queue.AddAfter(key, c.restarts.timeout)
			}
		}
	}
}

// Forget frees the restart slot of a deleted ObjectStore.
func (c *Controller) Forget(key string) { c.restarts.end(key) }

// Invalid reports an ObjectStore whose object does not convert.
func (c *Controller) Invalid(ctx context.Context, u *unstructured.Unstructured, err error) error {
	c.expireRestart(u) // a spec that does not convert holds no slot past the timeout
	return c.setCondition(ctx, u, metav1.ConditionFalse, ReasonInvalidSpec, err.Error())
}

// Reconcile brings the generated Secret, the StatefulSets' restart
// annotation and the CertificatesReady condition of one ObjectStore in
// line with the referenced Secrets. A Secret the user must fix is reported
// (condition, Event, log) and not retried: fixing it raises the event that
// syncs again. A deleted ObjectStore needs nothing: the garbage collector
// removes the generated Secret with its owner.
func (c *Controller) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (controller.Result, error) {
	return controller.Result{}, c.reconcile(ctx, store, u)
}

func (c *Controller) reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) error {
	key := store.Namespace + "/" + store.Name
	// Before anything of the tenant's can end the sync early (a Secret
	// it deleted): a slot is held for the timeout at most, whatever the
	// tenant does meanwhile.
	yielded := c.expireRestart(u)
	var operatorCA []byte
	if c.cfg.OperatorCA != nil {
		operatorCA = c.cfg.OperatorCA.CABundle()
	}
	a, err := assemble(ctx, store, c.secrets, operatorCA)
	var p *problem
	if errors.As(err, &p) {
		msg := "referenced Secret unusable: generated Secret left as it was"
		if p.secret == v1.GeneratedSecretName(store.Name) {
			msg = "generated Secret would be refused: nothing written"
		}
		c.log.Error().Str("objectstore", key).Str("secret", store.Namespace+"/"+p.secret).Str("field", p.field).Str("reason", reason.Of(err)).Str("detail", p.detail).
			Msg(msg)
		return c.setCondition(ctx, u, metav1.ConditionFalse, reason.Of(err), p.Error())
	}
	if err != nil {
		return err
	}

	generated, handEdited, created, err := c.generated(ctx, store, a)
	if err != nil {
		if errors.As(err, &p) {
			return c.setCondition(ctx, u, metav1.ConditionFalse, reason.Of(err), p.Error())
		}
		return c.refused(ctx, u, err)
	}
	sets, err := c.sets.StatefulSets(store.Namespace).List(v1.StatefulSetSelector(store.Name))
	if err != nil {
		return fmt.Errorf("list StatefulSets of %s: %w", key, err)
	}
	// The UID tells a recreated Secret from the old one: pods restart to
	// mount the new object even when its content is the same.
	uid := string(generated.UID)
	restart := a.hash[:16] + "-" + uid[:min(8, len(uid))]
	c.endRestart(u, sets, restart)
	var behind []*appsv1.StatefulSet
	for _, s := range sets {
		if s.Spec.Template.Annotations[RestartAnnotation] != restart {
			behind = append(behind, s)
		}
	}
	changed := created
	if changed == "" {
		changed = changedContent(generated, a)
	}
	if len(behind) == 0 {
		c.restarts.forget(key) // nothing to restart: it waits for no slot
	}
	if len(behind) > 0 {
		// A restart: it starts only when the tenant allows it (pause,
		// window) and a slot is free; until then the Secret and the pods
		// stay as they are.
		if changed == "" {
			changed = "StatefulSets " + setNames(behind) + " do not mount the current certificates"
		}
		if h := c.holdRestart(key, store, changed, yielded); h != nil {
			if h.after > 0 {
				c.queue.AddAfter(key, h.after)
			}
			// A waiting tenant is woken by every slot that frees; the
			// holders it named have changed, the wait has not. Saying so
			// again each time would write a status and an Event per freed
			// slot and per waiting tenant, and the Events would crowd its
			// Restarting Event out of the recorder's per-object budget.
			if have := meta.FindStatusCondition(store.Status.Conditions, v1.ConditionCertificatesReady); h.reason == ReasonRestartQueued &&
				have != nil && have.Status == metav1.ConditionFalse && have.Reason == ReasonRestartQueued &&
				have.ObservedGeneration == u.GetGeneration() && strings.HasPrefix(have.Message, changed+";") {
				return nil
			}
			return c.setCondition(ctx, u, metav1.ConditionFalse, h.reason, h.message)
		}
	}
	reason := created
	if written, why, err := c.rewrite(ctx, store, generated, handEdited, a); err != nil {
		return c.refused(ctx, u, err)
	} else if written != nil {
		generated, reason = written, why
	}
	if len(behind) > 0 {
		rolled, err := c.roll(ctx, behind, restart)
		if len(rolled) > 0 {
			c.cfg.Recorder.Eventf(u, corev1.EventTypeNormal, ReasonRestarting, "restarting the pods of StatefulSets %s: %s",
				strings.Join(rolled, ", "), changed)
		}
		if err != nil {
			return c.refused(ctx, u, err)
		}
		if len(rolled) > 0 {
			c.log.Info().Str("objectstore", key).Str("reason", ReasonRestarting).Str("changed", changed).Strs("restarted", rolled).
				Msg("restarting pods for new certificates")
		}
	}
	if reason != "" {
		c.rebuild.Inc()
		c.log.Info().Str("objectstore", key).Str("secret", store.Namespace+"/"+generated.Name).Str("reason", reason).
			Str("hash", a.hash).Msg("mount secret rebuilt")
	}
	return c.setCondition(ctx, u, metav1.ConditionTrue, ReasonCertificatesAssembled,
		// No hash in the message: a content change is not a status change.
		fmt.Sprintf("Secret %s holds %d keys from %d referenced Secrets", generated.Name, len(a.data), len(store.ReferencedSecrets())))
}

// holdRestart says why key may not restart now, nil once it holds a
// restart slot. yielded: key's slot just timed out while others waited.
func (c *Controller) holdRestart(key string, store *v1.ObjectStore, changed string, yielded bool) *hold {
	now := c.restarts.clock.Now()
	if h := holdRestart(store.Annotations[v1.RestartsPausedAnnotation] == "true", windowOf(store), now, changed); h != nil {
		c.restarts.end(key) // a held tenant waits for no slot
		return h
	}
	if yielded {
		// The waiting tenants go first, or a tenant whose StatefulSets
		// keep falling behind (its own edits, a GitOps tool reverting
		// the annotation) would take the slot it just gave up again,
		// forever. Queued after them, it asks for a slot like them.
		c.queue.Add(key)
		return &hold{reason: ReasonRestartQueued, message: fmt.Sprintf(
			"%s; the previous restart was not ready within %s: its slot went to a waiting tenant", changed, c.restarts.timeout)}
	}
	if ok, holders := c.restarts.begin(key); !ok {
		return &hold{reason: ReasonRestartQueued, message: queuedMessage(changed, c.restarts.max, holders, store.Namespace)}
	}
	// Looked at again when the slot times out, whatever happens next: the
	// writes that follow may fail, and their retries back off for minutes.
	if start, ok := c.restarts.since(key); ok && c.restarts.timeout > 0 {
		c.queue.AddAfter(key, start.Add(c.restarts.timeout).Sub(now))
	}
	return nil
}

// expireRestart frees key's restart slot once it held it for the
// timeout; true when tenants waited for it.
func (c *Controller) expireRestart(u *unstructured.Unstructured) bool {
	key := u.GetNamespace() + "/" + u.GetName()
	start, ok := c.restarts.since(key)
	if !ok || !c.restarts.expired(start) {
		return false
	}
	c.log.Warn().Str("objectstore", key).Str("reason", ReasonRestartTimeout).Stringer("after", c.restarts.timeout).
		Msg("the pods did not become ready again in time; the restart slot goes to the next tenant")
	c.cfg.Recorder.Eventf(u, corev1.EventTypeWarning, ReasonRestartTimeout,
		"the pods did not become ready within %s of their restart; the next tenant may restart", c.restarts.timeout)
	return c.restarts.end(key) > 0
}

// endRestart frees key's restart slot once its StatefulSets have rolled
// out to restart and are ready.
func (c *Controller) endRestart(u *unstructured.Unstructured, sets []*appsv1.StatefulSet, restart string) {
	key := u.GetNamespace() + "/" + u.GetName()
	if _, ok := c.restarts.since(key); !ok {
		return
	}
	for _, s := range sets {
		if !rolledOut(s, restart) {
			return
		}
	}
	c.restarts.end(key)
}

// generated reads the generated Secret, creating it when it is missing:
// pods cannot start without it, so creation waits for nothing. created
// says so ("" when it existed); handEdited says its data no longer
// matches the hash it records.
func (c *Controller) generated(ctx context.Context, store *v1.ObjectStore, a *assembly) (_ *corev1.Secret, handEdited bool, created string, _ error) {
	name := v1.GeneratedSecretName(store.Name)
	existing, digest, err := c.secrets.Digest(ctx, store.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: store.Namespace,
				Labels: map[string]string{v1.ObjectStoreLabel: v1.ObjectStoreLabelValue(store.Name)},
				Annotations: map[string]string{HashAnnotation: a.hash, SourcesAnnotation: a.sourcesJSON(),
					v1.ObjectStoreNameAnnotation: store.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(store,
					v1.GroupVersion.WithKind(v1.Kind))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: a.data,
		}
		created, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return nil, false, "", fmt.Errorf("create Secret %s/%s: %w", store.Namespace, name, err)
		}
		c.secrets.Remember(created, false)
		c.writes.WithLabelValues("secret_create").Inc()
		return created, false, "generated Secret missing (first creation, or deleted): created", nil
	case err != nil:
		return nil, false, "", fmt.Errorf("get Secret %s/%s: %w", store.Namespace, name, err)
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != store.UID {
		return nil, false, "", newProblem(ReasonGeneratedSecretConflict, name, "", "exists but is not owned by this ObjectStore; rename or delete it")
	}
	return existing, digest != existing.Annotations[HashAnnotation], "", nil
}

// changedContent says what of the referenced content differs from what
// the generated Secret holds ("" when nothing does).
func changedContent(generated *corev1.Secret, a *assembly) string {
	if generated.Annotations[HashAnnotation] == a.hash {
		return ""
	}
	return "referenced content changed: " + strings.Join(changedSources(generated.Annotations[SourcesAnnotation], a.sources), ", ")
}

// rewrite brings the generated Secret's data to a when they differ, and
// says why it wrote (nil: nothing written).
func (c *Controller) rewrite(ctx context.Context, store *v1.ObjectStore, generated *corev1.Secret, handEdited bool, a *assembly) (*corev1.Secret, string, error) {
	reason := changedContent(generated, a)
	if reason == "" {
		if !handEdited {
			return nil, "", nil
		}
		reason = "edited by hand: reverted"
	}
	s := generated.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[HashAnnotation] = a.hash
	s.Annotations[SourcesAnnotation] = a.sourcesJSON()
	s.Data = a.data
	updated, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("update Secret %s/%s: %w", store.Namespace, s.Name, err)
	}
	c.secrets.Remember(updated, false)
	c.writes.WithLabelValues("secret_update").Inc()
	return updated, reason, nil
}

func setNames(sets []*appsv1.StatefulSet) string {
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// roll sets the restart annotation on the pod template of sets, which
// makes Kubernetes roll their pods, and names the StatefulSets it
// patched.
//
// Each patch is conditional on the resourceVersion the sync saw: sets
// come from the cache, which may not have seen the patch of this
// controller's previous sync yet (the sync that follows a restart, woken
// by the Secret or the status it wrote, can run before the StatefulSets'
// watch delivers it). Patched again, such a StatefulSet would not roll
// (its template is the same), but the sync would say it restarts again,
// in a second Restarting Event. A conflict means the cache is behind that
// StatefulSet: it is left for the sync its newer version's event starts,
// which decides on what it then holds.
func (c *Controller) roll(ctx context.Context, sets []*appsv1.StatefulSet, value string) ([]string, error) {
	var rolled []string
	for _, s := range sets {
		precondition := ""
		if s.ResourceVersion != "" {
			precondition = fmt.Sprintf(`"metadata":{"resourceVersion":%q},`, s.ResourceVersion)
		}
		patch := fmt.Appendf(nil, `{%s"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, precondition, RestartAnnotation, value)
		_, err := c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			c.log.Debug().Str("statefulset", s.Namespace+"/"+s.Name).Str("resourceVersion", s.ResourceVersion).
				Msg("not rolled: the cache is behind the StatefulSet; its next event syncs the tenant again")
			continue
		}
		if err != nil {
			return rolled, fmt.Errorf("roll StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		c.writes.WithLabelValues("statefulset_patch").Inc()
		rolled = append(rolled, s.Name)
	}
	return rolled, nil
}

// refused reports a write the apiserver refused (invalid, forbidden, too
// large) in the condition, so CertificatesReady never stays True over a
// stale Secret, and returns err for a retry with backoff. Other errors
// (a timeout, a conflict) are only retried.
func (c *Controller) refused(ctx context.Context, u *unstructured.Unstructured, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err) {
		c.log.Error().Str("objectstore", u.GetNamespace()+"/"+u.GetName()).Str("reason", ReasonWriteRefused).Err(err).
			Msg("the apiserver refused a write; the generated Secret or the pods are stale")
		if cerr := c.setCondition(ctx, u, metav1.ConditionFalse, ReasonWriteRefused, err.Error()); cerr != nil {
			return cerr
		}
	}
	return err
}

// setCondition writes CertificatesReady when it changes, with an Event,
// the reason's remedy ending the message.
func (c *Controller) setCondition(ctx context.Context, u *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) error {
	if remedy := c.cfg.Reasons.Remedy(reason); remedy != "" {
		message = strings.TrimRight(message, ". ") + ". " + strings.ToUpper(remedy[:1]) + remedy[1:]
	}
	wrote, err := c.status.SetCondition(ctx, u, metav1.Condition{
		Type: v1.ConditionCertificatesReady, Status: status, Reason: reason, Message: message,
	})
	if wrote {
		c.writes.WithLabelValues("status_update").Inc()
	}
	return err
}
