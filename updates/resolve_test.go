package updates

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/object-store-operator/operator/internal/reason"
)

// Fixtures of namespace t: Services, their EndpointSlices and Pods, as
// a tenant (or the endpointslice controller) would write them.

func tService(name string, mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
		Ports: []corev1.ServicePort{{Name: "api", Port: 9000}}}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func tSlice(service, name string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	portName := "api"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints:   eps,
	}
}

// tEndpoint is an endpoint at addr; hostname may be empty, and podNS/pod
// name the targetRef (none when pod is empty).
func tEndpoint(addr, hostname, podNS, pod string, ready bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
	if hostname != "" {
		ep.Hostname = &hostname
	}
	if pod != "" {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: podNS, Name: pod}
	}
	return ep
}

func tPod(ns, name, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}}
}

// dialRecorder stands in for the network: it records every address the
// admin client's transport dials and refuses the connection, which
// madmin does not retry.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, address)
	return nil, fmt.Errorf("test network: %w", syscall.ECONNREFUSED)
}

func (d *dialRecorder) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// askThrough asks for server info as the controller does: through the
// ObjectStore t/tenant's spec.updates.endpoint when host is empty, else
// through host, a node endpoint MinIO reported. It returns what was
// dialled and the error as VersionCurrent words it.
func askThrough(t *testing.T, allowed, endpoint, host string, objs ...runtime.Object) ([]string, error) {
	t.Helper()
	c, cs := tenantController(t, allowed)
	for _, o := range objs {
		require.NoError(t, cs.Tracker().Add(o))
	}
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint(endpoint))
	require.NoError(t, err, "the name passes the policy; where it leads is decided at dial time")
	rec := &dialRecorder{}
	tn.dial = rec.dial
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if host == "" {
		_, err = c.serverInfo(ctx, tn)
		return rec.dialled(), err
	}
	adm, tr, err := tn.admin(host)
	if err != nil {
		return rec.dialled(), err
	}
	defer tr.CloseIdleConnections()
	_, err = adm.ServerInfo(ctx)
	if err != nil {
		err = reason.Errorf(CauseTenantUnreachable, "node %s: %w", host, adminError(err))
	}
	return rec.dialled(), err
}

// TestAnExternalNameServiceIsNotFollowed: an ExternalName Service of the
// tenant's namespace is a DNS alias to anywhere; the operator refuses it
// by name and dials nothing.
func TestAnExternalNameServiceIsNotFollowed(t *testing.T) {
	ext := tService("ext", func(s *corev1.Service) {
		s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "minio.other.svc.cluster.local"}
	})
	for _, endpoint := range []string{"https://ext.t.svc.cluster.local:9000", "https://ext.t.svc:9000", "https://m-0.ext.t.svc:9000"} {
		t.Run(endpoint, func(t *testing.T) {
			dialled, err := askThrough(t, "", endpoint, "", ext)
			assert.Empty(t, dialled, "nothing was dialled")
			require.Error(t, err)
			assert.Equal(t, CauseEndpointNotAllowed, reason.Of(err))
			assert.Contains(t, err.Error(), "Service t/ext is of type ExternalName")
			assert.Contains(t, err.Error(), "nothing was dialled")
		})
	}
}

// TestHandWrittenEndpointSlicesLeadOnlyToPodsOfTheNamespace: a Service
// without a selector has the EndpointSlices its namespace writes, which
// kube-proxy and DNS follow to any address. The operator dials a slice's
// address only when it is a Pod of the namespace that has that address.
func TestHandWrittenEndpointSlicesLeadOnlyToPodsOfTheNamespace(t *testing.T) {
	hand := tService("hand", nil) // no selector
	handHeadless := tService("hand", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	otherTenant := tPod("other", "minio-0", "10.0.1.5", nil)
	liar := tPod("t", "liar", "10.0.0.7", nil)
	hostNet := tPod("t", "hostnet", "10.0.0.8", nil)
	hostNet.Spec.HostNetwork = true
	// A finished Pod keeps its IP in its status after the network gave
	// it to another Pod, of any namespace: the endpointslice controller
	// leaves such Pods out, a hand-written slice need not.
	finished := tPod("t", "job-xyz", "10.0.1.5", nil)
	finished.Status.Phase = corev1.PodSucceeded
	deleting := tPod("t", "going", "10.0.1.5", nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, tc := range map[string]struct {
		objs     []runtime.Object
		endpoint string
		want     string
	}{
		"an address of no pod": {[]runtime.Object{hand, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.0.99", "", "", "", true))},
			"https://hand.t.svc:9000", "address 10.0.0.99 is no Pod of namespace t"},
		"apiserver through a headless Service": {[]runtime.Object{handHeadless, tSlice("hand", "hand-1", 443, tEndpoint("10.96.0.1", "", "", "", true))},
			"https://hand.t.svc:443", "address 10.96.0.1 is no Pod of namespace t"},
		"a pod of another namespace": {[]runtime.Object{hand, otherTenant, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.1.5", "", "other", "minio-0", true))},
			"https://hand.t.svc:9000", "address 10.0.1.5 names Pod other/minio-0, of another namespace"},
		"a pod of another namespace, by its name": {[]runtime.Object{handHeadless, otherTenant, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.1.5", "minio-0", "other", "minio-0", true))},
			"https://minio-0.hand.t.svc.cluster.local:9000", "address 10.0.1.5 names Pod other/minio-0, of another namespace"},
		"a pod of the namespace that has another address": {[]runtime.Object{hand, liar, otherTenant, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.1.5", "", "t", "liar", true))},
			"https://hand.t.svc:9000", "address 10.0.1.5 is not an address of Pod t/liar"},
		"a pod on its node's network": {[]runtime.Object{hand, hostNet, tSlice("hand", "hand-1", 10250, tEndpoint("10.0.0.8", "", "t", "hostnet", true))},
			"https://hand.t.svc:9000", "Pod t/hostnet runs on its node's network"},
		"a finished pod whose address another pod has now": {[]runtime.Object{hand, finished, otherTenant, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.1.5", "", "t", "job-xyz", true))},
			"https://hand.t.svc:9000", "Pod t/job-xyz has finished (Succeeded)"},
		"a pod being deleted": {[]runtime.Object{hand, deleting, otherTenant, tSlice("hand", "hand-1", 9000, tEndpoint("10.0.1.5", "", "t", "going", true))},
			"https://hand.t.svc:9000", "Pod t/going is being deleted"},
	} {
		t.Run(name, func(t *testing.T) {
			dialled, err := askThrough(t, "", tc.endpoint, "", tc.objs...)
			assert.Empty(t, dialled, "nothing was dialled")
			require.Error(t, err)
			assert.Equal(t, CauseEndpointNotAllowed, reason.Of(err))
			assert.Contains(t, err.Error(), "Service t/hand")
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "nothing was dialled")
		})
	}
}

// TestAServiceIsDialledAtItsOwnPodsNeverThroughItsClusterIP: a Service
// with a selector is dialled at the addresses of its pods, at the port
// its EndpointSlices give for the Service's port, as kube-proxy would
// route. Not at its ClusterIP: kube-proxy also routes it to a slice the
// tenant wrote by hand with the Service's name, and that address is
// never dialled.
func TestAServiceIsDialledAtItsOwnPodsNeverThroughItsClusterIP(t *testing.T) {
	minio := tService("minio", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "minio"} })
	objs := []runtime.Object{minio,
		tPod("t", "minio-0", "10.0.0.5", map[string]string{"app": "minio"}),
		tPod("other", "minio-0", "10.0.1.5", nil),
		// Sorted first: a slice the tenant added beside the controller's.
		tSlice("minio", "minio-a-forged", 9000, tEndpoint("10.0.1.5", "", "other", "minio-0", true)),
		tSlice("minio", "minio-x7k2p", 9443, tEndpoint("10.0.0.5", "", "t", "minio-0", true), tEndpoint("10.0.0.6", "", "t", "minio-1", false)),
	}
	dialled, err := askThrough(t, "", "https://minio.t.svc.cluster.local:9000", "", objs...)
	assert.Equal(t, []string{"10.0.0.5:9443"}, dialled, "the ready pod of the namespace, at its target port")
	require.Error(t, err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err), "the connection (refused here) is an ordinary unreachable tenant")
}

// TestAPodNameIsResolvedToThatPodsAddress: <pod>.<headless
// service>.<ns>.svc, as spec.updates.endpoint or as a node endpoint
// MinIO reports, is dialled at the address of that pod's endpoint,
// ready or not when the Service publishes not-ready addresses (as
// MinIO's headless Service does, so nodes find each other while
// starting).
func TestAPodNameIsResolvedToThatPodsAddress(t *testing.T) {
	hl := tService("minio-hl", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Selector = map[string]string{"app": "minio"}
		s.Spec.PublishNotReadyAddresses = true
	})
	labels := map[string]string{"app": "minio"}
	objs := []runtime.Object{hl, tPod("t", "minio-0", "10.0.0.5", labels), tPod("t", "minio-1", "10.0.0.6", labels),
		tSlice("minio-hl", "minio-hl-1", 9000, tEndpoint("10.0.0.5", "minio-0", "t", "minio-0", true),
			tEndpoint("10.0.0.6", "minio-1", "t", "minio-1", false))}

	dialled, err := askThrough(t, "", "https://minio-1.minio-hl.t.svc.cluster.local:9000", "", objs...)
	assert.Equal(t, []string{"10.0.0.6:9000"}, dialled, "spec.updates.endpoint")
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))

	dialled, _ = askThrough(t, "", "", "minio-1.minio-hl.t.svc.cluster.local:9000", objs...)
	assert.Equal(t, []string{"10.0.0.6:9000"}, dialled, "a node endpoint from server info")

	dialled, _ = askThrough(t, "", "https://minio-hl.t.svc:9000", "", objs...)
	assert.Equal(t, []string{"10.0.0.5:9000", "10.0.0.6:9000"}, dialled, "the headless Service: each pod in turn, as DNS would list them")

	dialled, err = askThrough(t, "", "https://minio-7.minio-hl.t.svc:9000", "", objs...)
	assert.Empty(t, dialled)
	require.Error(t, err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err), "a pod not there (yet) is not a refusal")
	assert.Contains(t, err.Error(), "Service t/minio-hl has no endpoint minio-7")
}

// TestAServiceNotThereYetIsUnreachableNotRefused: an ObjectStore is
// often applied before its Services and pods; until they exist the
// tenant is unreachable, which the controller waits out, not refused.
func TestAServiceNotThereYetIsUnreachableNotRefused(t *testing.T) {
	dialled, err := askThrough(t, "", "", "")
	assert.Empty(t, dialled)
	require.Error(t, err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
	assert.Contains(t, err.Error(), "Service t/tenant-hl does not exist")

	hl := tService("tenant-hl", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	dialled, err = askThrough(t, "", "", "", hl, tSlice("tenant-hl", "tenant-hl-1", 9000, tEndpoint("10.0.0.5", "", "t", "tenant-0", false)))
	assert.Empty(t, dialled)
	require.Error(t, err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
	assert.Contains(t, err.Error(), "Service t/tenant-hl has no ready endpoint")

	minio := tService("minio", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "minio"} })
	dialled, err = askThrough(t, "", "https://minio.t.svc:9000", "", minio)
	assert.Empty(t, dialled, "not even its ClusterIP")
	require.Error(t, err)
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
	assert.Contains(t, err.Error(), "Service t/minio has no ready endpoint for its port 9000")
}

// TestTheAllowListIsDialledAsBefore: a host the platform allowed
// (OPERATOR_ALLOWED_UPDATE_ENDPOINTS) is dialled as written, by DNS for a
// name, and nothing of the cluster is read for it.
func TestTheAllowListIsDialledAsBefore(t *testing.T) {
	for endpoint, want := range map[string]string{
		"http://127.0.0.1:9000":           "127.0.0.1:9000",
		"https://minio.example.com:9000":  "minio.example.com:9000",
		"https://minio.t.svc.example:443": "minio.t.svc.example:443",
	} {
		t.Run(endpoint, func(t *testing.T) {
			c, cs := tenantController(t, "127.0.0.0/8,minio.example.com,*.t.svc.example")
			tn, err := c.loadTenant(t.Context(), storeWithEndpoint(endpoint))
			require.NoError(t, err)
			rec := &dialRecorder{}
			tn.dial = rec.dial
			reads := len(cs.Actions())
			_, err = c.serverInfo(t.Context(), tn)
			require.Error(t, err)
			assert.Equal(t, []string{want}, rec.dialled())
			assert.Len(t, cs.Actions(), reads, "no Service, EndpointSlice or Pod was read")
		})
	}
}

// A hand-written slice may hold 1,000 endpoints of 100 addresses: what
// one dial keeps of them is the few it checks, not a copy of each.
func TestADialKeepsOnlyTheEndpointsItChecks(t *testing.T) {
	var eps []discoveryv1.Endpoint
	for i := range 1000 {
		ep := tEndpoint(fmt.Sprintf("10.1.%d.%d", i/250, i%250), "", "t", fmt.Sprintf("p%d", i), true)
		for j := range 9 {
			ep.Addresses = append(ep.Addresses, fmt.Sprintf("10.2.%d.%d", i/25, (i%25)*10+j))
		}
		eps = append(eps, ep)
	}
	cands, err := candidates(tService("hand", nil), []discoveryv1.EndpointSlice{*tSlice("hand", "hand-1", 9000, eps...)}, "", "", 9000)
	require.NoError(t, err)
	assert.Len(t, cands, maxCandidates)
}

// A Service with no ready Pod at the moment of the update call (its Pods
// restarting) is no refusal of MinIO's: the update is followed, not
// rolled. Before, the call's error carried TenantUnreachable and was
// taken for MinIO refusing the update.
func TestAnUpdateCallMeetingNoReadyPodIsFollowedNotRolled(t *testing.T) {
	c, cs := tenantController(t, "")
	hl := tService("tenant-hl", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	require.NoError(t, cs.Tracker().Add(hl))
	require.NoError(t, cs.Tracker().Add(tSlice("tenant-hl", "tenant-hl-1", 9000, tEndpoint("10.0.0.5", "", "t", "tenant-0", false))))
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint(""))
	require.NoError(t, err)
	rec := &dialRecorder{}
	tn.dial = rec.dial
	c.dial = nil // the real admin client, over the tenant's dial
	c.cfg.Timeout = time.Minute
	r := c.callOnce(t.Context(), tn, "https://op:4221/webhook/v1/update/minio."+relNew+".sha256sum", "", relNew, false)
	assert.NoError(t, r.err, "followed: the nodes say whether they updated")
	assert.Empty(t, rec.dialled())
}
