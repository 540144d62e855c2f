// Package claim keeps two installs of the operator from reconciling the
// same namespaces. Each install has one NamespaceClaim, a cluster-scoped
// object named after its namespace that lists the namespaces it watches
// (none: every namespace); the chart makes it. Only who may create
// cluster-scoped objects (a cluster admin, helm) makes a claim, so no
// tenant can forge one. When an older claim (creationTimestamp, set by
// the apiserver, then name) shares a namespace with this install's, this
// install is refused: it starts nothing and says why until that claim is
// gone. Claims are read through an informer: nothing is renewed.
package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Resource is the NamespaceClaim resource (cluster-scoped).
var Resource = schema.GroupVersionResource{Group: "aistor.min.io", Version: "v1", Resource: "namespaceclaims"}

// Config is what a Keeper needs: the install's namespace (its claim's
// name), its name (its Service's, for messages) and the namespaces it
// watches (empty: every namespace).
type Config struct {
	Client             dynamic.Interface
	Namespace, Install string
	Namespaces         []string
	Registerer         prometheus.Registerer
	Log                zerolog.Logger
}

// Keeper reads the claims and reports whether this install holds its
// namespaces.
type Keeper struct {
	cfg      Config
	scope    []string // sorted; nil: every namespace
	held     prometheus.Gauge
	informer cache.SharedIndexInformer
	wake     chan struct{}

	mu      sync.Mutex
	ok      bool  // held
	why     error // why not
	changed chan struct{}
}

// New returns a Keeper; Run reads the claims.
func New(cfg Config) (*Keeper, error) {
	if cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("claim: client and namespace are required")
	}
	cfg.Log = cfg.Log.With().Str("component", "claim").Str("claim", cfg.Namespace).Logger()
	k := &Keeper{cfg: cfg, wake: make(chan struct{}, 1), changed: make(chan struct{}),
		why:   errors.New("reading the NamespaceClaims (their CRD is in the chart's crds/)"),
		scope: slices.Compact(slices.Sorted(slices.Values(cfg.Namespaces))), // nil when empty
		held: promauto.With(cfg.Registerer).NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_namespace_claim_held",
			Help: "1 while this install holds its namespaces and reconciles them; 0 while another install's older claim overlaps them (see /readyz).",
		}),
		informer: dynamicinformer.NewFilteredDynamicInformer(cfg.Client, Resource, "", 0, cache.Indexers{}, nil).Informer(),
	}
	signal := func(any) {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
	_, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: signal, UpdateFunc: func(_, o any) { signal(o) }, DeleteFunc: signal,
	})
	return k, err
}

// Run reads the claims until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	go k.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
		return nil
	}
	for {
		k.check()
		select {
		case <-ctx.Done():
			return nil
		case <-k.wake:
		}
	}
}

// Ready is nil while this install holds its namespaces, else says why.
func (k *Keeper) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.why
}

// WhileHeld runs fn once this install holds its namespaces, with a
// context that ends if it stops holding them (its claim deleted, or an
// older one changed to overlap it): then it says why, and the process
// stops (informers do not start twice) and, started again, waits.
func (k *Keeper) WhileHeld(ctx context.Context, fn func(context.Context) error) error {
	if !k.await(ctx, true) {
		return nil
	}
	heldCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if k.await(heldCtx, false) {
			cancel()
		}
	}()
	err := fn(heldCtx)
	if ctx.Err() == nil && heldCtx.Err() != nil {
		return fmt.Errorf("stopped reconciling: %w", k.Ready())
	}
	return err
}

// await returns true once whether this install holds its namespaces is
// want, false if ctx ended first.
func (k *Keeper) await(ctx context.Context, want bool) bool {
	for {
		k.mu.Lock()
		ok, changed := k.ok, k.changed
		k.mu.Unlock()
		if ok == want {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// check decides from the cache. This install's claim must be in it: the
// watch delivers claims in the order they were written, so every claim
// older than it is in the cache too.
func (k *Keeper) check() {
	var own *unstructured.Unstructured
	var others []*unstructured.Unstructured
	for _, obj := range k.informer.GetStore().List() {
		if u := obj.(*unstructured.Unstructured); u.GetName() == k.cfg.Namespace {
			own = u
		} else {
			others = append(others, u)
		}
	}
	if own == nil {
		k.set(false, fmt.Errorf("no NamespaceClaim %s: the chart makes it (helm upgrade restores it); run by hand, a cluster admin makes it (docs/install.md, several installs)", k.cfg.Namespace))
		return
	}
	if theirs := namespaces(own); !slices.Equal(theirs, k.scope) {
		k.set(false, fmt.Errorf("NamespaceClaim %s lists %s but this install watches %s: helm upgrade writes it from watchNamespaces, or a cluster admin edits it",
			k.cfg.Namespace, show(theirs), show(k.scope)))
		return
	}
	slices.SortFunc(others, older)
	for _, c := range others {
		shared, overlap := overlapping(k.scope, namespaces(c))
		if !overlap || older(c, own) > 0 {
			continue
		}
		install, _, _ := unstructured.NestedString(c.Object, "spec", "install")
		k.set(false, fmt.Errorf("refused: install %[1]s/%[2]s (NamespaceClaim %[1]s, watching %[3]s) claimed %[4]s first; this install (watching %[5]s) reconciles nothing while that claim exists: give each install its own watchNamespaces; if that install is gone (its namespace deleted without helm uninstall), remove its claim: kubectl delete namespaceclaim %[1]s",
			c.GetName(), install, show(namespaces(c)), show(shared), show(k.scope)))
		return
	}
	k.set(true, nil)
}

func (k *Keeper) set(ok bool, why error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	was, wasWhy := k.ok, k.why
	k.ok, k.why = ok, why
	switch {
	case ok && !was:
		k.held.Set(1)
		k.cfg.Log.Info().Str("namespaces", show(k.scope)).Msg("namespace claim held: this install reconciles its namespaces")
	case !ok && (wasWhy == nil || why.Error() != wasWhy.Error()):
		k.held.Set(0)
		k.cfg.Log.Error().Err(why).Str("reason", "NamespacesClaimed").Str("namespaces", show(k.scope)).
			Msg("refused: this install reconciles nothing until its claim is the oldest on its namespaces")
	}
	if ok != was {
		close(k.changed)
		k.changed = make(chan struct{})
	}
}

// older orders claims by creation, then by name: every install sees the
// same order.
func older(a, b *unstructured.Unstructured) int {
	if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

// namespaces are a claim's, sorted; nil: every namespace. A claim that
// does not read as a list of names counts as every namespace: better
// refused than reconciling twice.
func namespaces(u *unstructured.Unstructured) []string {
	ns, _, err := unstructured.NestedStringSlice(u.Object, "spec", "namespaces")
	if err != nil || len(ns) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(ns)))
}

// overlapping returns the namespaces two scopes share (nil when either is
// every namespace) and whether they share any.
func overlapping(ours, theirs []string) ([]string, bool) {
	if ours == nil || theirs == nil {
		return append(ours, theirs...), true // nil when both are every namespace
	}
	var shared []string
	for _, ns := range theirs {
		if _, found := slices.BinarySearch(ours, ns); found {
			shared = append(shared, ns)
		}
	}
	return shared, len(shared) > 0
}

// show names namespaces in a message.
func show(ns []string) string {
	switch {
	case ns == nil:
		return "every namespace"
	case len(ns) > 10: // a message lists ten
		return "namespaces " + strings.Join(ns[:10], ", ") + fmt.Sprintf(" and %d more", len(ns)-10)
	}
	return "namespaces " + strings.Join(ns, ", ")
}
