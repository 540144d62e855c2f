package updates

// Where a host of the namespace rule leads. <service>.<ns>.svc is a name
// of the tenant's own namespace, and so is what stands behind it: an
// ExternalName Service is a DNS alias to anywhere, and a Service's
// EndpointSlices lead wherever their addresses say. The tenant may write
// slices by hand, for a Service without a selector and beside the
// controller's for one with a selector too (kube-proxy routes a
// ClusterIP to every slice labelled with the Service's name, whoever
// manages it). So the operator does not ask DNS, nor dial a ClusterIP:
// it reads the Service and its slices through the API, and dials only an
// address that a Pod of the namespace has.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/internal/reason"
)

const (
	// maxSlices bounds the EndpointSlices read for one Service: the
	// controller puts 100 endpoints in each, and a hand-written one may
	// hold 1,000 endpoints of 100 addresses, each read at every dial.
	maxSlices = 8
	// maxCandidates bounds the endpoints checked (one Pod read each) for
	// one connection; the first that is a Pod of the namespace is dialled,
	// the next ones only if it does not answer.
	maxCandidates = 8
)

// candidate is an endpoint a Service leads to, before it is checked.
type candidate struct {
	addr netip.AddrPort
	// raw is the address as the slice wrote it, for messages.
	raw string
	ref *corev1.ObjectReference
}

// resolve returns the addresses target leads to on port, in the order
// to dial them: each an address of a Pod of target's namespace. Its
// error has the cause CauseEndpointNotAllowed when the Service leads
// only elsewhere (nothing is to be dialled), CauseTenantUnreachable
// when it leads nowhere yet (no Service, no ready endpoint: a tenant
// starting), and no cause for a failed read.
func resolve(ctx context.Context, kube kubernetes.Interface, target serviceTarget, port uint16) ([]netip.AddrPort, error) {
	if kube == nil {
		return nil, fmt.Errorf("no Kubernetes client to resolve Service %s/%s", target.namespace, target.service)
	}
	svc, err := kube.CoreV1().Services(target.namespace).Get(ctx, target.service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, reason.Errorf(CauseTenantUnreachable, "Service %s/%s does not exist", target.namespace, target.service)
	}
	if err != nil {
		return nil, fmt.Errorf("read Service %s/%s: %w", target.namespace, target.service, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, reason.Errorf(CauseEndpointNotAllowed,
			"Service %s/%s is of type ExternalName, a DNS alias the operator does not follow (it dials only addresses of the namespace's Pods); nothing was dialled",
			target.namespace, target.service)
	}
	cands, err := candidatesOf(ctx, kube, svc, target, port)
	if err != nil {
		return nil, err
	}
	var addrs []netip.AddrPort
	var refused, unreachable error
	for _, c := range cands {
		err := checkPod(ctx, kube, target.namespace, c)
		switch {
		case err == nil:
			addrs = append(addrs, c.addr)
		case reason.Of(err) == CauseEndpointNotAllowed:
			refused = cmpOr(refused, err)
		default:
			unreachable = cmpOr(unreachable, err)
		}
	}
	var st stale
	switch {
	case len(addrs) > 0:
		return addrs, nil
	case target.only != "" && (errors.As(refused, &st) || errors.As(unreachable, &st)):
		// The Pod's own endpoint, as an earlier Pod of its name left it:
		// its slice lags the Pod, and will catch up.
		return nil, endpointNotReady{fmt.Errorf("Service %s/%s: %w", target.namespace, target.service, st)}
	case refused != nil:
		return nil, reason.Errorf(CauseEndpointNotAllowed, "Service %s/%s: %w; nothing was dialled", target.namespace, target.service, refused)
	}
	return nil, fmt.Errorf("Service %s/%s: %w", target.namespace, target.service, unreachable)
}

// stale: an endpoint that names a Pod as an earlier Pod of its name was
// (its UID, its address), or one being deleted.
type stale struct{ error }

func (s stale) Unwrap() error { return s.error }

// notBehind: the Service has no endpoint of the Pod asked for
// (serviceTarget.only) in any of its EndpointSlices.
type notBehind struct{ error }

func (n notBehind) Unwrap() error { return n.error }

// endpointNotReady: the Service leads to the Pod asked for, but not now:
// its endpoint is not ready, or is past the slices read.
type endpointNotReady struct{ error }

func (n endpointNotReady) Unwrap() error { return n.error }

// maxOnlyPages bounds the pages of maxSlices EndpointSlices read to find
// one Pod's endpoint (serviceTarget.only): a page at a time is held.
const maxOnlyPages = 16

// candidatesOf reads svc's EndpointSlices (maxSlices of them; for one
// Pod's endpoint, page after page until it is found, maxOnlyPages at
// most) and returns their candidates.
func candidatesOf(ctx context.Context, kube kubernetes.Interface, svc *corev1.Service, target serviceTarget, port uint16) ([]candidate, error) {
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + target.service, Limit: maxSlices}
	for page := 1; ; page++ {
		list, err := kube.DiscoveryV1().EndpointSlices(target.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the EndpointSlices of Service %s/%s: %w", target.namespace, target.service, err)
		}
		cands, err := candidates(svc, list.Items, target.pod, target.only, port)
		var nb notBehind
		if target.only == "" || !errors.As(err, &nb) {
			return cands, err
		}
		if list.Continue == "" {
			return nil, selects(ctx, kube, svc, target.only, nb)
		}
		if page == maxOnlyPages {
			return nil, endpointNotReady{reason.Errorf(CauseTenantUnreachable, "Service %s/%s has more than %d EndpointSlices, and Pod %s's endpoint is not among them",
				target.namespace, target.service, maxOnlyPages*maxSlices, cleanText(target.only, 253))}
		}
		opts.Continue = list.Continue
	}
}

// selects is notBehind's error for a Service that does not select Pod
// only (a Service of one pool: it is asked as a whole), and a wait for
// one that does (the endpointslice controller has not listed it yet:
// another node is never asked in its stead).
func selects(ctx context.Context, kube kubernetes.Interface, svc *corev1.Service, only string, nb notBehind) error {
	if len(svc.Spec.Selector) == 0 {
		return nb
	}
	pod, err := kube.CoreV1().Pods(svc.Namespace).Get(ctx, only, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nb
	}
	if err != nil {
		return fmt.Errorf("read Pod %s/%s: %w", svc.Namespace, only, err)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		return nb
	}
	return endpointNotReady{reason.Errorf(CauseTenantUnreachable, "Service %s/%s selects Pod %s but does not list its endpoint yet", svc.Namespace, svc.Name, cleanText(only, 253))}
}

// cmpOr keeps the first error.
func cmpOr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// candidates are the endpoints of svc's slices that DNS or kube-proxy
// would lead a connection to on port, with the port to dial: for a
// headless Service or a pod name the port itself (DNS gives the Pod's
// address), else the slices' port of the same name as the Service's
// port (kube-proxy's mapping to the target port). Only ready endpoints,
// or every one when the Service publishes not-ready addresses; for pod,
// only the endpoint of that hostname; for only, only the endpoint of
// that Pod.
func candidates(svc *corev1.Service, sl []discoveryv1.EndpointSlice, pod, only string, port uint16) ([]candidate, error) {
	ns, name := svc.Namespace, svc.Name
	mapPort := pod == "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
	portName := ""
	if mapPort {
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(port) })
		if i < 0 {
			return nil, reason.Errorf(CauseTenantUnreachable, "Service %s/%s has no port %d", ns, name, port)
		}
		portName = svc.Spec.Ports[i].Name
	}
	slices.SortFunc(sl, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []candidate
	// listed: an endpoint of Pod only (any, without only); named: one of
	// hostname pod too.
	listed, named, ready := false, false, false
	for _, s := range sl {
		dialPort := port
		if mapPort {
			i := slices.IndexFunc(s.Ports, func(p discoveryv1.EndpointPort) bool {
				return p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) &&
					(p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP)
			})
			if i < 0 || *s.Ports[i].Port < 1 || *s.Ports[i].Port > 65535 {
				continue
			}
			dialPort = uint16(*s.Ports[i].Port)
		}
		for _, ep := range s.Endpoints {
			if only != "" && (ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Name != only) {
				continue
			}
			listed = true
			if pod != "" && (ep.Hostname == nil || *ep.Hostname != pod) {
				continue
			}
			named = true
			if !svc.Spec.PublishNotReadyAddresses && ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			ready = true
			for _, raw := range ep.Addresses {
				if len(out) == maxCandidates {
					// No more are checked: none is kept (a slice may
					// hold 100,000 addresses).
					return out, nil
				}
				c := candidate{raw: cleanText(raw, maxHostInMessage), ref: ep.TargetRef}
				if a, err := netip.ParseAddr(raw); err == nil {
					c.addr = netip.AddrPortFrom(a, dialPort)
				}
				out = append(out, c)
			}
		}
	}
	switch {
	case only != "" && !listed:
		return nil, notBehind{reason.Errorf(CauseTenantUnreachable, "Service %s/%s has no endpoint of Pod %s", ns, name, cleanText(only, 253))}
	case pod != "" && !named:
		// A Service lists a Pod under its hostname only if it is the
		// Pod's subdomain: the name leads nowhere, now or later.
		return nil, reason.Errorf(CauseTenantUnreachable, "Service %s/%s has no endpoint %s", ns, name, pod)
	case only != "" && !ready:
		return nil, endpointNotReady{reason.Errorf(CauseTenantUnreachable, "Service %s/%s lists Pod %s's endpoint as not ready yet", ns, name, cleanText(only, 253))}
	case !ready || len(out) == 0:
		what := "ready endpoint"
		switch {
		case pod != "":
			what += " " + pod
		case mapPort:
			what += fmt.Sprintf(" for its port %d", port)
		}
		return nil, reason.Errorf(CauseTenantUnreachable, "Service %s/%s has no %s", ns, name, what)
	}
	return out, nil
}

// checkPod says whether c's address is one its Pod of namespace ns has.
// A refusal (an address of no Pod, of another namespace's, one the Pod
// does not have, a Pod on its node's network) has the cause
// CauseEndpointNotAllowed; a Pod gone or replaced since the slice was
// written (its controller catches up within seconds) is unreachable.
func checkPod(ctx context.Context, kube kubernetes.Interface, ns string, c candidate) error {
	ref := c.ref
	if !c.addr.IsValid() {
		return reason.Errorf(CauseEndpointNotAllowed, "address %q is not an IP address", c.raw)
	}
	if ref == nil || ref.Kind != "Pod" || ref.Name == "" {
		return reason.Errorf(CauseEndpointNotAllowed, "address %s is no Pod of namespace %s (its endpoint names no Pod)", c.raw, ns)
	}
	if ref.Namespace != "" && ref.Namespace != ns {
		return reason.Errorf(CauseEndpointNotAllowed, "address %s names Pod %s/%s, of another namespace", c.raw, cleanText(ref.Namespace, 63), cleanText(ref.Name, 253))
	}
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return reason.Errorf(CauseTenantUnreachable, "address %s names Pod %s/%s, which does not exist", c.raw, ns, cleanText(ref.Name, 253))
	}
	if err != nil {
		return fmt.Errorf("read Pod %s/%s: %w", ns, ref.Name, err)
	}
	if ref.UID != "" && ref.UID != pod.UID {
		return stale{reason.Errorf(CauseTenantUnreachable, "address %s names an earlier Pod %s/%s, since replaced", c.raw, ns, pod.Name)}
	}
	if !slices.ContainsFunc(podIPs(pod), func(a netip.Addr) bool { return a == c.addr.Addr().Unmap() }) {
		return stale{reason.Errorf(CauseEndpointNotAllowed, "address %s is not an address of Pod %s/%s", c.raw, ns, pod.Name)}
	}
	// A Pod that finished or is going keeps its IP in its status after
	// the network may have given it to another Pod, of any namespace.
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return reason.Errorf(CauseEndpointNotAllowed, "address %s: Pod %s/%s has finished (%s); its address may be another Pod's now", c.raw, ns, pod.Name, pod.Status.Phase)
	}
	if pod.DeletionTimestamp != nil {
		return stale{reason.Errorf(CauseEndpointNotAllowed, "address %s: Pod %s/%s is being deleted; its address may be another Pod's soon", c.raw, ns, pod.Name)}
	}
	if pod.Spec.HostNetwork {
		return reason.Errorf(CauseEndpointNotAllowed, "address %s: Pod %s/%s runs on its node's network, whose address is the node's", c.raw, ns, pod.Name)
	}
	return nil
}

// podIPs are the addresses the Pod's status gives it.
func podIPs(pod *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, ip := range append([]corev1.PodIP{{IP: pod.Status.PodIP}}, pod.Status.PodIPs...) {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// notDialled is a connection refused before it was made, for a reason
// resolve gave. It is a refused connection to madmin, which gives up at
// once on ECONNREFUSED and retries any other error ten times: asking the
// API again within the second would not change the answer.
type notDialled struct{ err error }

func (e notDialled) Error() string        { return e.err.Error() }
func (e notDialled) Unwrap() error        { return e.err }
func (e notDialled) Is(target error) bool { return target == syscall.ECONNREFUSED }
