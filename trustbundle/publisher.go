// Package trustbundle publishes the CA bundle pods need to trust the
// upgrade server as a ClusterTrustBundle (certificates.k8s.io v1, or
// v1beta1 behind the ClusterTrustBundle feature gate), so a pod can mount
// it with a clusterTrustBundle projected volume instead of reading the
// operator's <name>-generated Secret. It is one small controller: the
// informers and queue run on every replica, only the leader writes
// (internal/controller.Term), and where the apiserver serves no
// ClusterTrustBundles it does nothing at all.
package trustbundle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/object-store-operator/operator/internal/controller"
)

const (
	// Group serves ClusterTrustBundles.
	Group = "certificates.k8s.io"
	// Resource is their plural.
	Resource = "clustertrustbundles"
	// SignerName is the bundle's spec.signerName. A bundle with a signer
	// name can be written only by whoever holds attest on that signer
	// (the ClusterTrustBundleAttest admission plugin), so a pod that
	// selects bundles by signer name and label gets none that another
	// party with mere write access to ClusterTrustBundles made. It names
	// no CSR signer: it stands for "the issuer of the object-store
	// operator's upgrade-server certificate" (docs/trust.md).
	SignerName = "aistor.min.io/object-store-operator"
	// NamespaceLabel carries the operator's namespace: with several
	// installs, a pod selects its own install's bundle by it.
	NamespaceLabel = "aistor.min.io/operator-namespace"
	// FieldManager owns the bundle's fields (server-side apply).
	FieldManager = "object-store-operator-trustbundle"
)

// Name is the bundle of the install in namespace: a bundle with a signer
// name must be named after it (its "/" as ":"), then a suffix.
func Name(namespace string) string {
	return strings.ReplaceAll(SignerName, "/", ":") + ":" + namespace
}

// CASource is what knows the CA bundle pods must trust (autocert.Current).
type CASource interface {
	// CABundle is the PEM bundle, nil before a certificate is loaded.
	CABundle() []byte
	// Loaded is false until a serving certificate is loaded.
	Loaded() bool
}

// Config configures a Publisher.
type Config struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace is the operator's: it names and labels the bundle.
	Namespace string
	// Owner is a ClusterRole whose deletion removes the bundle (the
	// garbage collector follows the owner reference): the chart's own,
	// deleted by helm uninstall. Empty: no owner, the bundle stays until
	// deleted by hand.
	Owner  string
	Source CASource
	// Changed is signalled when Source's bundle may have changed.
	Changed <-chan struct{}
	// Resync re-checks the bundle this often even without events (0:
	// never; the operator's settings table holds the default).
	Resync time.Duration
	// Clock paces the retries of discovery; nil: the real clock.
	Clock clock.WithTicker
	Log   zerolog.Logger
	// Registerer takes the count of recovered panics (nil: not exported).
	Registerer prometheus.Registerer
}

// Publisher keeps the ClusterTrustBundle equal to what Source says pods
// must trust.
type Publisher struct {
	cfg   Config
	log   zerolog.Logger
	name  string
	queue *controller.Queue

	// gvr and informer are set by each term's Run, before its syncs.
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer

	// warned is how the last sync ended (note), so a problem that stays
	// is logged once (only the one worker touches it).
	warned string
	// problem is warned as Problem reports it, for readers off the
	// worker.
	problem atomic.Pointer[string]
}

// New returns a Publisher; Run starts it.
func New(cfg Config) (*Publisher, error) {
	if cfg.Kube == nil || cfg.Dynamic == nil || cfg.Source == nil || cfg.Namespace == "" {
		return nil, errors.New("trustbundle: Kube, Dynamic, Source and Namespace are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	name := Name(cfg.Namespace)
	return &Publisher{
		cfg:  cfg,
		log:  cfg.Log.With().Str("component", "trustbundle").Str("clusterTrustBundle", name).Logger(),
		name: name,
		queue: controller.NewQueue(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "trustbundle"}),
	}, nil
}

// NeedLeaderElection is true: only the leader writes the bundle.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Run asks discovery whether ClusterTrustBundles are served; where they
// are not, it logs that (info) and does nothing more this term. Where
// they are, it watches the one bundle and keeps it until ctx (the
// leadership term) ends.
func (p *Publisher) Run(ctx context.Context) error {
	gvr, served := p.discover(ctx)
	if !served {
		return nil
	}
	p.gvr = gvr
	// Only the bundle of this install: RBAC grants list and watch on
	// that name alone, which a single-name field selector satisfies.
	p.informer = dynamicinformer.NewFilteredDynamicInformer(p.cfg.Dynamic, gvr, metav1.NamespaceAll, p.cfg.Resync,
		cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.name).String()
		}).Informer()
	if err := p.informer.SetTransform(controller.TrimForCache); err != nil {
		return fmt.Errorf("trustbundle: %w", err)
	}
	enqueue := func(any) { p.queue.Add(p.name) }
	if _, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("trustbundle event handler: %w", err)
	}
	go p.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced) {
		return nil
	}
	p.queue.Add(p.name)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.cfg.Changed:
				p.queue.Add(p.name)
			}
		}
	}()
	controller.Run(ctx, p.queue, 1, p.sync, controller.HandlePanics(
		controller.PanicCounter(p.cfg.Registerer, "trustbundle"), p.log, nil,
		func(_ string, err error) {
			p.log.Warn().Err(err).Msg("ClusterTrustBundle not written; retrying with backoff")
		}))
	return nil
}

// discover finds the version that serves ClusterTrustBundles. An
// apiserver that does not answer is asked again (1 s doubling to 30 s)
// rather than taken for one that serves none.
func (p *Publisher) discover(ctx context.Context) (schema.GroupVersionResource, bool) {
	backoff := time.Second
	for {
		gvr, served, err := p.lookup()
		if err == nil {
			if served {
				p.log.Info().Str("version", gvr.Version).Msg("ClusterTrustBundles are served: publishing the CA pods must trust as one")
			} else {
				p.log.Info().Msg("ClusterTrustBundles are not served (certificates.k8s.io v1 or v1beta1): publishing none")
			}
			return gvr, served
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			p.log.Info().Err(err).Msg("cannot tell whether ClusterTrustBundles are served: publishing none")
			return schema.GroupVersionResource{}, false
		}
		p.log.Warn().Err(err).Stringer("retryIn", backoff).Msg("cannot reach the apiserver to learn whether ClusterTrustBundles are served; retrying")
		select {
		case <-ctx.Done():
			return schema.GroupVersionResource{}, false
		case <-p.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (p *Publisher) lookup() (schema.GroupVersionResource, bool, error) {
	// Preferred first: v1 (GA in Kubernetes 1.37), then v1beta1 (1.33 to
	// 1.36, behind the gate). The object is the same in both; v1alpha1
	// (1.27 to 1.32) is not used.
	for _, v := range []string{"v1", "v1beta1"} {
		list, err := p.cfg.Kube.Discovery().ServerResourcesForGroupVersion(Group + "/" + v)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("discovery of %s/%s: %w", Group, v, err)
		}
		for _, r := range list.APIResources {
			if r.Name == Resource {
				return schema.GroupVersionResource{Group: Group, Version: v, Resource: Resource}, true, nil
			}
		}
	}
	return schema.GroupVersionResource{}, false, nil
}

// sync makes the bundle hold the CA pods must trust now. A bundle that
// cannot be published (no CA certificate in what pods are given, the
// owner missing) is logged once and not retried: the next change of the
// CA, of the bundle, or the resync looks again.
func (p *Publisher) sync(ctx context.Context, _ string) error {
	if !p.cfg.Source.Loaded() {
		return nil
	}
	anchors, err := ParseAnchors(p.cfg.Source.CABundle())
	if err != nil {
		p.note("ClusterTrustBundle not published: keeping what it holds", err.Error())
		return nil
	}
	// What this sync ends with when the bundle is written or current.
	done, why := "", ""
	if len(anchors.Skipped) > 0 {
		done, why = "ClusterTrustBundle published without entries of the CA bundle it cannot hold", strings.Join(anchors.Skipped, "; ")
	}
	if cur := p.cached(); cur != nil && p.upToDate(cur, anchors.PEM) {
		p.note(done, why)
		return nil
	}
	var owner *metav1.OwnerReference
	if p.cfg.Owner != "" {
		role, err := p.cfg.Kube.RbacV1().ClusterRoles().Get(ctx, p.cfg.Owner, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Published without it, the bundle would outlive the install;
			// during an uninstall the ClusterRole goes first.
			p.note("ClusterTrustBundle not published: its owner is missing", "ClusterRole "+p.cfg.Owner+" not found")
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the bundle's owner, ClusterRole %s: %w", p.cfg.Owner, err)
		}
		owner = &metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name, UID: role.UID}
	}
	if _, err := p.cfg.Dynamic.Resource(p.gvr).Apply(ctx, p.name, p.desired(anchors.PEM, owner),
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply ClusterTrustBundle %s: %w", p.name, err)
	}
	p.log.Info().Str("version", p.gvr.Version).Strs("subjects", anchors.Subjects).Int("count", len(anchors.Subjects)).
		Str("owner", p.cfg.Owner).Msg("ClusterTrustBundle published")
	p.note(done, why)
	return nil
}

// note records how a sync ended and logs a warning (msg, reason) when it
// differs from how the last one ended: a problem that stays is logged
// once. Only the one worker calls it.
func (p *Publisher) note(msg, reason string) {
	key := msg + "\x00" + reason
	if key != p.warned && msg != "" {
		p.log.Warn().Str("reason", reason).Msg(msg)
	}
	p.warned = key
	problem := ""
	if msg != "" {
		problem = msg + ": " + reason
	}
	p.problem.Store(&problem)
}

// Problem is how the last sync ended when the bundle is not what the
// source says pods must trust, or is published without some of it (the
// warning logged once); "" when it is, or before the first sync.
func (p *Publisher) Problem() string {
	if s := p.problem.Load(); s != nil {
		return *s
	}
	return ""
}

func (p *Publisher) cached() *unstructured.Unstructured {
	obj, exists, err := p.informer.GetStore().GetByKey(p.name)
	if err != nil || !exists {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// upToDate tells whether cur already holds anchors, the signer, the
// labels and (when one is set) an owner reference to the owner by name. A
// stale owner (the ClusterRole deleted and made again) needs no check
// here: the garbage collector deletes the bundle, and its deletion syncs.
func (p *Publisher) upToDate(cur *unstructured.Unstructured, anchors string) bool {
	bundle, _, _ := unstructured.NestedString(cur.Object, "spec", "trustBundle")
	signer, _, _ := unstructured.NestedString(cur.Object, "spec", "signerName")
	labels := cur.GetLabels()
	if bundle != anchors || signer != SignerName || labels[NamespaceLabel] != p.cfg.Namespace ||
		labels["app.kubernetes.io/managed-by"] != "object-store-operator" || cur.GetDeletionTimestamp() != nil {
		return false
	}
	owned := slices.ContainsFunc(cur.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
		return r.Kind == "ClusterRole" && r.Name == p.cfg.Owner
	})
	return owned == (p.cfg.Owner != "")
}

func (p *Publisher) desired(anchors string, owner *metav1.OwnerReference) *unstructured.Unstructured {
	meta := map[string]any{
		"name": p.name,
		"labels": map[string]any{
			NamespaceLabel:                 p.cfg.Namespace,
			"app.kubernetes.io/managed-by": "object-store-operator",
		},
	}
	if owner != nil {
		meta["ownerReferences"] = []any{map[string]any{
			"apiVersion": owner.APIVersion, "kind": owner.Kind, "name": owner.Name, "uid": string(owner.UID),
		}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": p.gvr.GroupVersion().String(),
		"kind":       "ClusterTrustBundle",
		"metadata":   meta,
		"spec":       map[string]any{"signerName": SignerName, "trustBundle": anchors},
	}}
}
