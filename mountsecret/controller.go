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
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// WhenLoaded is closed once a serving certificate is loaded; until
	// then CABundle says nothing about what pods must trust.
	WhenLoaded() <-chan struct{}
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
	// SyncsPerTenant bounds how many of one tenant's ObjectStores are
	// synced at once (0: no bound beyond Workers).
	SyncsPerTenant int
	// UnitOf names the unit an ObjectStore key (namespace/name) counts
	// against in every share and budget (tenant.Resolver.Unit); nil: its
	// namespace.
	UnitOf func(key string) string
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
	cfg      Config
	log      zerolog.Logger
	loop     *controller.Loop[*v1.ObjectStore]
	secrets  *secretcache.Reader
	sets     appslisters.StatefulSetLister
	stores   cache.Indexer
	queue    workqueue.TypedRateLimitingInterface[string]
	writes   *prometheus.CounterVec
	rebuild  prometheus.Counter
	status   *status.Writer
	restarts *restarts
}

// NewSecretReader is a secretcache.Reader whose metadata view carries this
// controller's digest of a generated Secret's data.
func NewSecretReader(meta cache.Indexer, kube kubernetes.Interface, limits secretcache.Limits) *secretcache.Reader {
	return secretcache.NewReader(meta, kube, contentHash, limits)
}

// FieldManager owns the CertificatesReady condition.
const FieldManager = "object-store-operator-mountsecret"

// New wires the controller's event handlers; call Run to work.
func New(cfg Config) (*Controller, error) {
	if cfg.Reader == nil {
		cfg.Reader = NewSecretReader(cfg.Secrets.GetIndexer(), cfg.Kube, secretcache.Limits{})
		if err := cfg.Reader.Track(cfg.ObjectStores, v1.SecretIndex((*v1.ObjectStore).SecretsRead)); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "mountsecret").Logger(),
		secrets: cfg.Reader,
		sets:    cfg.StatefulSets.Lister(),
		stores:  cfg.ObjectStores.GetIndexer(),
		writes:  cfg.Metrics.writes,
		rebuild: cfg.Metrics.rebuild,
		status:  &status.Writer{Client: cfg.Dynamic, Manager: FieldManager, Recorder: cfg.Recorder, Reasons: cfg.Reasons},
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if err := cfg.ObjectStores.AddIndexers(cache.Indexers{secretRefIndex: v1.SecretIndex((*v1.ObjectStore).ReferencedSecrets)}); err != nil {
		return nil, fmt.Errorf("index ObjectStores by Secret: %w", err)
	}
	var err error
	c.loop, err = controller.NewLoop(controller.Options[*v1.ObjectStore]{
		Name: "mountsecret", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Workers: cfg.Workers, PerUnit: cfg.SyncsPerTenant, UnitOf: cfg.UnitOf,
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
	c.restarts = newRestarts(cfg.MaxConcurrentRestarts, cfg.RestartTimeout, cfg.Clock, c.queue.Add, cfg.UnitOf)
	if err := c.watch(); err != nil {
		return nil, err
	}
	return c, nil
}

// watch queues the ObjectStores a Secret or StatefulSet event concerns:
// the handlers only enqueue keys.
func (c *Controller) watch() error {
	handlers := []struct {
		informer cache.SharedInformer
		h        cache.ResourceEventHandler
	}{
		{c.cfg.Secrets, cache.ResourceEventHandlerFuncs{
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
		{c.cfg.StatefulSets.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.statefulSetChanged,
			UpdateFunc: func(_, obj any) { c.statefulSetChanged(obj) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("mount-secret event handler: %w", err)
		}
	}
	return nil
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
	if c.cfg.OperatorCA == nil {
		return true
	}
	select {
	case <-c.cfg.OperatorCA.WhenLoaded():
		return true
	default:
	}
	c.log.Info().Msg("waiting for the serving certificate before the first rebuild: its CA goes into every generated Secret")
	select {
	case <-ctx.Done():
		return false
	case <-c.cfg.OperatorCA.WhenLoaded():
		return true
	}
}

// Forget frees the restart slot of a deleted ObjectStore.
func (c *Controller) Forget(key string) { c.restarts.end(key) }

// Invalid reports an ObjectStore whose object does not convert.
func (c *Controller) Invalid(ctx context.Context, u *unstructured.Unstructured, err error) error {
	c.expireRestart(u) // a spec that does not convert holds no slot past the timeout
	return c.setCondition(ctx, u, metav1.ConditionFalse, ReasonInvalidSpec, err.Error())
}
