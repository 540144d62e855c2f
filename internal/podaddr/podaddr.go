// Package podaddr tells the upgrade server who is behind a source
// address: the namespace of the tenant pod that has it, and whether one of
// that namespace's ObjectStores is updating to a binary. It reads what the
// operator's informers already hold (tenant pods trimmed to their
// addresses, ObjectStores' status.update and status.binary), so the
// upgrade server shares itself out per tenant without talking to
// Kubernetes.
package podaddr

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// ipIndex indexes pods by each of their addresses.
const ipIndex = "podaddr.ip"

// Index answers upgradeserver.Clients from two informers.
type Index struct {
	pods   cache.Indexer
	stores cache.Indexer
}

// New indexes pods by address; call it before pods starts. stores is the
// ObjectStore informer (unstructured), indexed by namespace.
func New(pods, stores cache.SharedIndexInformer) (*Index, error) {
	if err := pods.AddIndexers(cache.Indexers{ipIndex: podIPs}); err != nil {
		return nil, fmt.Errorf("index pods by address: %w", err)
	}
	return &Index{pods: pods.GetIndexer(), stores: stores.GetIndexer()}, nil
}

func podIPs(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !fromStatefulSet(p) {
		// A host-network pod has its node's address, which every other
		// such pod on the node shares; a finished pod keeps an address
		// the kubelet may have given to another pod (of any namespace);
		// a pod no StatefulSet controls is no tenant's MinIO. None names
		// a namespace.
		return nil, nil
	}
	ips := make([]string, 0, len(p.Status.PodIPs))
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			ips = append(ips, a.Unmap().String())
		}
	}
	return ips, nil
}

// fromStatefulSet reports whether a StatefulSet controls p, as it controls
// every MinIO pod of a tenant.
func fromStatefulSet(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "StatefulSet" && ref.APIVersion == "apps/v1"
}

// Namespace is the namespace of the tenant pod at addr; "" when no known
// pod has it, or pods of more than one namespace claim it (an address
// reused while the informer catches up): such an address is only itself.
func (x *Index) Namespace(addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	objs, err := x.pods.ByIndex(ipIndex, addr.Unmap().String())
	if err != nil {
		return ""
	}
	ns := ""
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if ns != "" && ns != p.Namespace {
			return ""
		}
		ns = p.Namespace
	}
	return ns
}

// Updating reports whether an ObjectStore in namespace records an
// in-place update in flight (status.update) to the binary with this
// SHA-256 (status.binary.sha256); to any binary when sha256 is "".
func (x *Index) Updating(namespace, sha256 string) bool {
	if namespace == "" {
		return false
	}
	objs, err := x.stores.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return false
	}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if _, inFlight, _ := unstructured.NestedMap(u.Object, "status", "update"); !inFlight {
			continue
		}
		if sum, _, _ := unstructured.NestedString(u.Object, "status", "binary", "sha256"); sha256 == "" || sum == sha256 {
			return true
		}
	}
	return false
}
