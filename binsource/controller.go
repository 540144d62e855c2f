package binsource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/upgradeserver"
)

const pullSecretIndex = "pullSecret"

// ControllerConfig configures the controller.
type ControllerConfig struct {
	Dynamic      dynamic.Interface
	ObjectStores cache.SharedIndexInformer
	// Secrets is an informer over the ObjectStores' namespaces (pull Secrets).
	Secrets coreinformers.SecretInformer
	Fetcher *Fetcher
	// Keep is how many newer releases must exist before an unreferenced
	// release is removed from the store.
	Keep     int
	Recorder record.EventRecorder
	Log      zerolog.Logger
	Workers  int
}

// Controller makes every ObjectStore's release available in the store.
type Controller struct {
	cfg     ControllerConfig
	log     zerolog.Logger
	stores  cache.Indexer
	secrets corelisters.SecretLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	wanted map[string]string // ObjectStore key -> release it wants
}

// NewController wires event handlers; call Run to work.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "binsource").Logger(),
		stores:  cfg.ObjectStores.GetIndexer(),
		secrets: cfg.Secrets.Lister(),
		synced:  []cache.InformerSynced{cfg.ObjectStores.HasSynced, cfg.Secrets.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			// Registries come and go outside the cluster: retry from 5 s,
			// doubling to 5 min.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "binsource"}),
		wanted: map[string]string{},
	}
	if err := cfg.ObjectStores.AddIndexers(cache.Indexers{pullSecretIndex: v1.SecretIndex((*v1.ObjectStore).PullSecrets)}); err != nil {
		return nil, fmt.Errorf("index ObjectStores by pull Secret: %w", err)
	}
	if _, err := cfg.ObjectStores.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, obj any) {
			// Status writes (ours and the mount-secret controller's) do not
			// change what to fetch; only spec changes and resyncs do.
			o, n := old.(*unstructured.Unstructured), obj.(*unstructured.Unstructured)
			if o.GetGeneration() != n.GetGeneration() || o.GetResourceVersion() == n.GetResourceVersion() {
				c.enqueue(obj)
			}
		},
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("binsource ObjectStore handler: %w", err)
	}
	if _, err := cfg.Secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.secretChanged,
		UpdateFunc: func(_, obj any) { c.secretChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("binsource Secret handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) { controller.EnqueueObject(c.queue, obj) }

func (c *Controller) secretChanged(obj any) {
	controller.EnqueueReferrers(c.queue, c.stores, pullSecretIndex, obj)
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("binsource: informers did not sync")
	}
	c.cfg.Fetcher.cfg.Store.RemoveStaleTemporaries()
	// Failures are reported on the ObjectStore by sync itself.
	controller.Run(ctx, c.queue, c.cfg.Workers, c.sync, nil)
	return nil
}

// sync makes the ObjectStore's release available and reports it in the
// BinaryAvailable condition. Failures are retried with backoff: a
// registry, a pull Secret or a CA Secret may be fixed at any time.
func (c *Controller) sync(ctx context.Context, key string) error {
	obj, exists, err := c.stores.GetByKey(key)
	if err != nil {
		return fmt.Errorf("get ObjectStore %s: %w", key, err)
	}
	if !exists {
		if c.setWanted(key, "") {
			c.housekeep()
		}
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	store, err := v1.FromUnstructured(u)
	if err != nil {
		return c.report(ctx, u, err)
	}
	if store.Spec.Image == "" {
		c.setWanted(key, "")
		return nil
	}
	var secrets []*corev1.Secret
	for _, ref := range store.Spec.ImagePullSecrets {
		s, err := c.secrets.Secrets(store.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return c.report(ctx, u, fmt.Errorf("%w: pull Secret %s not found in namespace %s", errPullSecret, ref.Name, store.Namespace))
		}
		if err != nil {
			return fmt.Errorf("get pull Secret %s/%s: %w", store.Namespace, ref.Name, err)
		}
		secrets = append(secrets, s)
	}
	kc, err := newKeychain(secrets)
	if err != nil {
		return c.report(ctx, u, fmt.Errorf("%w: %v", errPullSecret, err))
	}
	res, err := c.cfg.Fetcher.Ensure(ctx, store.Spec.Image, kc)
	if err != nil {
		return c.report(ctx, u, err)
	}
	changed := c.setWanted(key, res.Release)
	msg := fmt.Sprintf("minio.%s is served for %s (source: %s)", res.Release, strings.Join(res.Platforms, ", "), res.Source)
	if res.Unsigned {
		msg += "; unsigned: the image has no .sha256sum/.minisig, the checksum was computed by the operator"
	}
	if _, err := c.setCondition(ctx, u, metav1.ConditionTrue, "Available", msg); err != nil {
		return err
	}
	// A resync that resolves to the same release changes nothing to keep.
	if changed {
		c.housekeep()
	}
	return nil
}

// report records a failure on the ObjectStore and returns it for a retry.
func (c *Controller) report(ctx context.Context, u *unstructured.Unstructured, cause error) error {
	key := u.GetNamespace() + "/" + u.GetName()
	c.log.Error().Str("objectstore", key).Str("image", imageOf(u)).Str("reason", reason(cause)).Err(cause).
		Msg("release not available; nothing added to the store")
	if _, err := c.setCondition(ctx, u, metav1.ConditionFalse, reason(cause), cause.Error()); err != nil {
		return err
	}
	return cause
}

func imageOf(u *unstructured.Unstructured) string {
	image, _, _ := unstructured.NestedString(u.Object, "spec", "image")
	return image
}

func (c *Controller) setCondition(ctx context.Context, u *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) (bool, error) {
	return v1.SetCondition(ctx, c.cfg.Dynamic, c.cfg.Recorder, u, metav1.Condition{
		Type: v1.ConditionBinaryAvailable, Status: status, Reason: reason, Message: message,
	})
}

// setWanted records the release an ObjectStore wants ("" for none) and
// reports whether that changed.
func (c *Controller) setWanted(key, release string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	before, had := c.wanted[key]
	if release == "" {
		delete(c.wanted, key)
		return had
	}
	c.wanted[key] = release
	return !had || before != release
}

// housekeep removes releases no ObjectStore wants once Keep newer releases
// exist for the same platform. It waits until every ObjectStore with an
// image has been resolved, so a release is never removed just because the
// operator restarted and has not looked at its tenant yet.
func (c *Controller) housekeep() {
	c.mu.Lock()
	referenced := map[string]bool{}
	for _, key := range c.stores.ListKeys() {
		obj, ok, _ := c.stores.GetByKey(key)
		if !ok || imageOf(obj.(*unstructured.Unstructured)) == "" {
			continue
		}
		release, resolved := c.wanted[key]
		if !resolved {
			c.mu.Unlock()
			return
		}
		referenced[release] = true
	}
	c.mu.Unlock()

	store := c.cfg.Fetcher.cfg.Store
	byPlatform := map[string][]string{}
	for _, b := range store.Binaries() {
		if b.Platform != "" {
			byPlatform[b.Platform] = append(byPlatform[b.Platform], b.Release)
		}
	}
	for platform, releases := range byPlatform {
		// MinIO release names sort by time.
		sort.Sort(sort.Reverse(sort.StringSlice(releases)))
		for i, release := range releases {
			if referenced[release] || i < c.cfg.Keep {
				continue
			}
			binName, err := upgradeserver.BinaryName(release)
			if err != nil {
				continue
			}
			if err := store.Remove(platform, binName); err != nil {
				c.log.Warn().Err(err).Str("platform", platform).Str("release", release).Msg("could not remove an unreferenced release")
				continue
			}
			c.log.Info().Str("platform", platform).Str("release", release).Int("newer", i).
				Msg("removed a release no ObjectStore references (OPERATOR_STORE_KEEP newer ones exist)")
		}
	}
	c.cfg.Fetcher.updateStoreSize()
}
