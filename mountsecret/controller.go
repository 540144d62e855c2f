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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
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
	return m
}

// Controller is the mount-secret controller.
type Controller struct {
	cfg     Config
	log     zerolog.Logger
	term    controller.Term
	secrets *secretcache.Reader
	sets    appslisters.StatefulSetLister
	stores  cache.Indexer
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	writes  *prometheus.CounterVec
	rebuild prometheus.Counter
	// caLoaded is closed once the operator CA is known (at once without
	// one): the first rebuild waits for it.
	caLoaded chan struct{}
	status   *status.Writer
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
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
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
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "mountsecret").Logger(),
		secrets: cfg.Reader,
		sets:    cfg.StatefulSets.Lister(),
		stores:  cfg.ObjectStores.GetIndexer(),
		synced:  []cache.InformerSynced{cfg.Secrets.HasSynced, cfg.StatefulSets.Informer().HasSynced, cfg.ObjectStores.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "mountsecret"}),
		writes:   cfg.Metrics.writes,
		rebuild:  cfg.Metrics.rebuild,
		caLoaded: make(chan struct{}),
		status:   &status.Writer{Client: cfg.Dynamic, Manager: FieldManager, Recorder: cfg.Recorder},
	}
	if cfg.OperatorCA == nil {
		close(c.caLoaded)
	}
	if err := cfg.ObjectStores.AddIndexers(cache.Indexers{secretRefIndex: v1.SecretIndex((*v1.ObjectStore).ReferencedSecrets)}); err != nil {
		return nil, fmt.Errorf("index ObjectStores by Secret: %w", err)
	}
	handlers := []struct {
		informer cache.SharedInformer
		h        cache.ResourceEventHandler
	}{
		{cfg.ObjectStores, cache.ResourceEventHandlerFuncs{
			// The Secret cache drops what no ObjectStore references any
			// more (secretcache.Reader.Track).
			AddFunc:    c.enqueueStore,
			UpdateFunc: func(_, obj any) { c.enqueueStore(obj) },
			DeleteFunc: c.enqueueStore,
		}},
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

func (c *Controller) enqueueStore(obj any) { controller.EnqueueObject(c.queue, obj) }

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
		// A long name does not fit the label; the annotation has it whole.
		name := s.Annotations[v1.ObjectStoreNameAnnotation]
		if name == "" {
			name = s.Labels[v1.ObjectStoreLabel]
		}
		if name != "" {
			c.queue.Add(s.Namespace + "/" + name)
		}
	}
}

// Run works until ctx ends; syncs act only while leading (Lead). Changes
// of the operator CA re-sync every store.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("mount secret: informers did not sync")
	}
	if ca := c.cfg.OperatorCA; ca != nil {
		// The one reader of ca.Changed().
		go func() {
			for loaded := false; ; {
				if !loaded && ca.Loaded() {
					loaded = true
					close(c.caLoaded)
				}
				select {
				case <-ctx.Done():
					return
				case <-ca.Changed():
					c.enqueueAll()
				}
			}
		}()
	}
	controller.Run(ctx, c.queue, c.cfg.Workers, c.sync, controller.HandlePanics(
		controller.PanicCounter(c.cfg.Registerer, "mountsecret"), c.log,
		controller.ReportInternalError(&c.term, c.stores, c.status, v1.ConditionCertificatesReady),
		func(key string, err error) {
			c.log.Warn().Str("objectstore", key).Err(err).Msg("sync failed; retrying with backoff")
		}))
	return nil
}

// Lead makes the controller act until ctx (the leadership term) ends. It
// waits for the serving certificate first: a rebuild before it is loaded
// would drop CAs.operator.crt from every generated Secret and roll every
// tenant, twice (autocert's cold start, a custom Secret briefly missing).
func (c *Controller) Lead(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	select {
	case <-c.caLoaded:
	default:
		c.log.Info().Msg("waiting for the serving certificate before the first rebuild: its CA goes into every generated Secret")
		select {
		case <-ctx.Done():
			return nil
		case <-c.caLoaded:
		}
	}
	c.term.Lead(ctx, func() {
		c.log.Info().Int("objectStores", len(c.stores.ListKeys())).Msg("mount-secret controller started")
		c.enqueueAll()
	})
	return nil
}

func (c *Controller) enqueueAll() {
	for _, key := range c.stores.ListKeys() {
		c.queue.Add(key)
	}
}

// sync brings the generated Secret, the StatefulSets' restart annotation
// and the CertificatesReady condition of one ObjectStore in line with the
// referenced Secrets. A Secret the user must fix is reported (condition,
// Event, log) and not retried: fixing it raises the event that syncs again.
func (c *Controller) sync(_ context.Context, key string) error {
	ctx := c.term.Context()
	if ctx == nil {
		return nil // following: the next leader queues every key
	}
	obj, exists, err := c.stores.GetByKey(key)
	if err != nil {
		return fmt.Errorf("get ObjectStore %s: %w", key, err)
	}
	if !exists {
		// The garbage collector removes the generated Secret with its owner.
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	store, err := v1.FromUnstructured(u)
	if err != nil {
		return c.setCondition(ctx, u, metav1.ConditionFalse, "InvalidSpec", err.Error())
	}
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
		c.log.Error().Str("objectstore", key).Str("secret", store.Namespace+"/"+p.secret).Str("reason", p.reason).Str("detail", p.detail).
			Msg(msg)
		return c.setCondition(ctx, u, metav1.ConditionFalse, p.reason, p.Error())
	}
	if err != nil {
		return err
	}

	generated, reason, err := c.ensureSecret(ctx, store, a)
	if err != nil {
		if errors.As(err, &p) {
			return c.setCondition(ctx, u, metav1.ConditionFalse, p.reason, p.Error())
		}
		return c.refused(ctx, u, err)
	}
	// The UID tells a recreated Secret from the old one: pods restart to
	// mount the new object even when its content is the same.
	uid := string(generated.UID)
	restart := a.hash[:16] + "-" + uid[:min(8, len(uid))]
	restarted, err := c.rollStatefulSets(ctx, store, restart)
	if err != nil {
		return c.refused(ctx, u, err)
	}
	if reason != "" {
		c.rebuild.Inc()
		c.log.Info().Str("objectstore", key).Str("secret", store.Namespace+"/"+generated.Name).Str("reason", reason).
			Str("hash", a.hash).Strs("restarted", restarted).Msg("mount secret rebuilt")
	}
	return c.setCondition(ctx, u, metav1.ConditionTrue, "CertificatesAssembled",
		// No hash in the message: a content change is not a status change.
		fmt.Sprintf("Secret %s holds %d keys from %d referenced Secrets", generated.Name, len(a.data), len(store.ReferencedSecrets())))
}

// ensureSecret creates or rewrites the generated Secret when its content
// differs, and says why it did ("" when nothing was written).
func (c *Controller) ensureSecret(ctx context.Context, store *v1.ObjectStore, a *assembly) (*corev1.Secret, string, error) {
	name := v1.GeneratedSecretName(store.Name)
	hash := a.hash
	existing, digest, err := c.secrets.Digest(ctx, store.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: store.Namespace,
				Labels: map[string]string{v1.ObjectStoreLabel: v1.ObjectStoreLabelValue(store.Name)},
				Annotations: map[string]string{HashAnnotation: hash, SourcesAnnotation: a.sourcesJSON(),
					v1.ObjectStoreNameAnnotation: store.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(store,
					v1.GroupVersion.WithKind(v1.Kind))},
			},
			Type: corev1.SecretTypeOpaque,
			Data: a.data,
		}
		created, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("create Secret %s/%s: %w", store.Namespace, name, err)
		}
		c.secrets.Remember(created, false)
		c.writes.WithLabelValues("secret_create").Inc()
		return created, "generated Secret missing (first creation, or deleted): created", nil
	case err != nil:
		return nil, "", fmt.Errorf("get Secret %s/%s: %w", store.Namespace, name, err)
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != store.UID {
		return nil, "", &problem{secret: name, reason: "GeneratedSecretConflict",
			detail: "exists but is not owned by this ObjectStore; rename or delete it"}
	}
	if existing.Annotations[HashAnnotation] == hash && digest == hash {
		return existing, "", nil
	}
	reason := "edited by hand: reverted"
	if existing.Annotations[HashAnnotation] != hash {
		reason = "referenced content changed: " + strings.Join(changedSources(existing.Annotations[SourcesAnnotation], a.sources), ", ")
	}
	s := existing.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[HashAnnotation] = hash
	s.Annotations[SourcesAnnotation] = a.sourcesJSON()
	s.Data = a.data
	updated, err := c.cfg.Kube.CoreV1().Secrets(store.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("update Secret %s/%s: %w", store.Namespace, name, err)
	}
	c.secrets.Remember(updated, false)
	c.writes.WithLabelValues("secret_update").Inc()
	return updated, reason, nil
}

// rollStatefulSets sets the restart annotation on the pod template of
// every StatefulSet of the store whose value differs, which makes
// Kubernetes roll its pods.
func (c *Controller) rollStatefulSets(ctx context.Context, store *v1.ObjectStore, value string) ([]string, error) {
	sets, err := c.sets.StatefulSets(store.Namespace).List(v1.StatefulSetSelector(store.Name))
	if err != nil {
		return nil, fmt.Errorf("list StatefulSets of %s/%s: %w", store.Namespace, store.Name, err)
	}
	var rolled []string
	for _, s := range sets {
		if s.Spec.Template.Annotations[RestartAnnotation] == value {
			continue
		}
		patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartAnnotation, value)
		if _, err := c.cfg.Kube.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
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
		c.log.Error().Str("objectstore", u.GetNamespace()+"/"+u.GetName()).Str("reason", "WriteRefused").Err(err).
			Msg("the apiserver refused a write; the generated Secret or the pods are stale")
		if cerr := c.setCondition(ctx, u, metav1.ConditionFalse, "WriteRefused", err.Error()); cerr != nil {
			return cerr
		}
	}
	return err
}

// setCondition writes CertificatesReady when it changes, with an Event.
func (c *Controller) setCondition(ctx context.Context, u *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) error {
	wrote, err := c.status.SetCondition(ctx, u, metav1.Condition{
		Type: v1.ConditionCertificatesReady, Status: status, Reason: reason, Message: message,
	})
	if wrote {
		c.writes.WithLabelValues("status_update").Inc()
	}
	return err
}
