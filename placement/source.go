package placement

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// PodSelector is the pod informer's label selector: pods that carry the
// label the statefulset controller sets on every pod it creates, so the
// operator caches no other pod.
const PodSelector = appsv1.StatefulSetPodNameLabel

// nodeIndex indexes pods by spec.nodeName, to find the tenants a Node's
// label change concerns.
const nodeIndex = "nodeName"

// Source answers Platforms for an ObjectStore from informers: the
// StatefulSets labelled v1.ObjectStoreLabel, StatefulSet pods (TrimPod)
// and Nodes (TrimNode). Nothing is listed per call.
type Source struct {
	sets  appslisters.StatefulSetLister
	pods  cache.Indexer
	nodes cache.Indexer
	// HasSynced tells when the three informers have synced, or the pod
	// or Node informer was forbidden to list (then Platforms answers
	// from what it has: node selectors, the default).
	HasSynced cache.InformerSynced
	// podsForbidden, nodesForbidden: a list or watch was refused.
	podsForbidden, nodesForbidden atomic.Bool
	// mu guards handlers: each reader of Platforms registers its own
	// (OnChange), so placement calls no controller it was not asked to.
	mu       sync.RWMutex
	handlers []func(key string)
}

// OnChange registers changed, called with an ObjectStore's key
// ("namespace/name") whenever what Platforms answers for it may have
// changed: a pod bound, created or deleted, a Node's labels, a
// StatefulSet's node selector. A controller that reads Platforms
// registers its own handler (it queues the key): data flows from the
// shared informers to each reader, never from one controller to another.
func (s *Source) OnChange(changed func(key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, changed)
}

func (s *Source) changed(key string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, h := range s.handlers {
		h(key)
	}
}

// NewSource wires the informers; see OnChange for who hears of a change.
//
// An operator whose RBAC predates this (no list or watch on pods or
// nodes) must still serve and report: a refused list counts as synced,
// is logged, and Platforms falls back to node selectors.
func NewSource(sets cache.SharedIndexInformer, pods, nodes cache.SharedIndexInformer, log zerolog.Logger) (*Source, error) {
	if err := pods.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("placement pod index: %w", err)
	}
	s := &Source{sets: appslisters.NewStatefulSetLister(sets.GetIndexer()), pods: pods.GetIndexer(), nodes: nodes.GetIndexer()}
	s.HasSynced = func() bool {
		return sets.HasSynced() && (pods.HasSynced() || s.podsForbidden.Load()) && (nodes.HasSynced() || s.nodesForbidden.Load())
	}
	for _, w := range []struct {
		inf       cache.SharedIndexInformer
		forbidden *atomic.Bool
		resource  string
	}{{pods, &s.podsForbidden, "pods"}, {nodes, &s.nodesForbidden, "nodes"}} {
		if err := w.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				if !w.forbidden.Swap(true) {
					log.Error().Err(err).Str("resource", w.resource).Str("reason", "Forbidden").
						Msg("cannot list or watch " + w.resource + ": tenants' platforms come from their StatefulSets' node selectors, else linux/amd64; grant list and watch on " + w.resource + " (the chart's ClusterRole does)")
				}
				return
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		}); err != nil {
			return nil, fmt.Errorf("placement %s watch error handler: %w", w.resource, err)
		}
	}
	if err := s.notifyOn(sets, pods, nodes); err != nil {
		return nil, err
	}
	return s, nil
}

// notifyOn tells the handlers (OnChange) of the changes to pods, Nodes
// and StatefulSets that may change what Platforms answers.
func (s *Source) notifyOn(sets, pods, nodes cache.SharedIndexInformer) error {
	changed := s.changed
	pod := func(obj any) {
		if key := s.storeOfPod(obj); key != "" {
			changed(key)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pod,
		UpdateFunc: func(old, obj any) {
			// Status changes (most updates) move no pod.
			o, n := old.(*corev1.Pod), obj.(*corev1.Pod)
			if o.Spec.NodeName != n.Spec.NodeName {
				pod(obj)
			}
		},
		DeleteFunc: pod,
	}); err != nil {
		return fmt.Errorf("placement pod handler: %w", err)
	}
	node := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		onNode, _ := s.pods.ByIndex(nodeIndex, n.Name)
		seen := map[string]bool{}
		for _, p := range onNode {
			if key := s.storeOfPod(p); key != "" && !seen[key] {
				seen[key] = true
				changed(key)
			}
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: node,
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Node), obj.(*corev1.Node)
			if o.Labels[LabelOS] != n.Labels[LabelOS] || o.Labels[LabelArch] != n.Labels[LabelArch] {
				node(obj)
			}
		},
		DeleteFunc: node,
	}); err != nil {
		return fmt.Errorf("placement node handler: %w", err)
	}
	if _, err := sets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key := storeOfSet(obj); key != "" {
				changed(key)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, n := old.(*appsv1.StatefulSet), obj.(*appsv1.StatefulSet)
			if !maps.Equal(o.Spec.Template.Spec.NodeSelector, n.Spec.Template.Spec.NodeSelector) {
				if key := storeOfSet(obj); key != "" {
					changed(key)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if key := storeOfSet(obj); key != "" {
				changed(key)
			}
		},
	}); err != nil {
		return fmt.Errorf("placement StatefulSet handler: %w", err)
	}
	return nil
}

// Platforms returns the platforms of the ObjectStore's pods (see the
// package function).
func (s *Source) Platforms(namespace, name string) []string {
	sets, err := s.sets.StatefulSets(namespace).List(v1.StatefulSetSelector(name))
	if err != nil {
		return nil
	}
	in := make([]Set, 0, len(sets))
	for _, set := range sets {
		in = append(in, Set{NodeSelector: set.Spec.Template.Spec.NodeSelector, Nodes: s.podNodes(set)})
	}
	return Platforms(in, func(node string) (map[string]string, bool) {
		obj, ok, _ := s.nodes.GetByKey(node)
		if !ok {
			return nil, false
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, false
		}
		return n.Labels, true
	})
}

// podNodes returns the nodeName of each pod the StatefulSet controls: its
// selector's pods in its namespace, owned by it.
func (s *Source) podNodes(set *appsv1.StatefulSet) []string {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil // an empty selector would match every pod of the namespace
	}
	var out []string
	_ = cache.ListAllByNamespace(s.pods, set.Namespace, sel, func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && ownedBy(p, set.Name) {
			out = append(out, p.Spec.NodeName)
		}
	})
	return out
}

func ownedBy(p *corev1.Pod, set string) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "StatefulSet" && ref.Name == set
}

// storeOfPod returns the key of the ObjectStore whose StatefulSet controls
// the pod, "" for any other pod.
func (s *Source) storeOfPod(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return ""
	}
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "StatefulSet" {
		return ""
	}
	set, err := s.sets.StatefulSets(p.Namespace).Get(ref.Name)
	if err != nil {
		return ""
	}
	return storeOfSet(set)
}

// storeOfSet returns the key of the ObjectStore a labelled StatefulSet
// runs (the annotation has a name too long for the label).
func storeOfSet(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	set, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return ""
	}
	name := set.Annotations[v1.ObjectStoreNameAnnotation]
	if name == "" {
		name = set.Labels[v1.ObjectStoreLabel]
	}
	if name == "" {
		return ""
	}
	return set.Namespace + "/" + name
}

// TrimPod is the pod informer's transform: what Platforms reads (name,
// namespace, labels, owner references, spec.nodeName) and what podaddr
// reads (the addresses, whether they are the node's, the phase), nothing
// else.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	var ready []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return &corev1.Pod{
		// UID, creation, deletion, the revision label and Ready are what
		// the rollout replaces pods by (package rollout).
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion, UID: p.UID,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Labels: p.Labels, OwnerReferences: p.OwnerReferences},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		// The addresses and phase tell the upgrade server which tenant a
		// client is (internal/podaddr): a finished pod keeps its address
		// after the kubelet gave it to another.
		Status: corev1.PodStatus{PodIPs: p.Status.PodIPs, Phase: p.Status.Phase, Conditions: ready},
	}, nil
}

// TrimNode is the Node informer's transform: its name and the two
// platform labels, nothing else (a Node's status is tens of KiB).
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	l := map[string]string{}
	for _, k := range []string{LabelOS, LabelArch} {
		if v, ok := n.Labels[k]; ok {
			l[k] = v
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, Labels: l}}, nil
}
