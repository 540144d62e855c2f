package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// endpointTenant is an ObjectStore whose image the operator resolves and
// whose StatefulSet already runs it, with credentials, and whose
// spec.updates.endpoint is endpoint: the updater's first step is to ask
// that endpoint for server info.
func endpointTenant(t *testing.T, e *binEnv, store, endpoint string) {
	t.Helper()
	older, _ := minioReleases(t)
	image := e.reg.pushImage(t, "minio/aistor:"+older, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: older})
	putNamedSecret(t, e.tenantNS, store+"-env", map[string][]byte{apiv1.ConfigEnvKey: []byte(
		"export MINIO_ROOT_USER=tenant-admin\nexport MINIO_ROOT_PASSWORD=tenant-secret-123\n")})
	applyYAML(t, fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  image: %[3]s
  imagePullSecrets:
    - name: regcred
  configuration:
    name: %[1]s-env
  updates:
    endpoint: %[4]s
`, store, e.tenantNS, image, endpoint))
	tenantStatefulSet(t, e.tenantNS, store, 1, image)
}

// waitVersionReason waits for the store's VersionCurrent reason.
func waitVersionReason(t *testing.T, ns, store, reason string) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	if !assert.Eventually(t, func() bool {
		c = conditionOf(t, ns, store, apiv1.ConditionVersionCurrent)
		return c.Reason == reason
	}, 60*time.Second, 100*time.Millisecond, "want VersionCurrent reason %s", reason) {
		t.Fatalf("last VersionCurrent of %s: %+v", store, c)
	}
	return c
}

// storeEvents waits for an Event of reason about the store and returns the
// messages of every Event about it, as the tenant reads them.
func storeEvents(t *testing.T, ns, store, reason string) []string {
	t.Helper()
	var msgs []string
	require.Eventually(t, func() bool {
		list, err := adminClient(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		msgs = msgs[:0]
		found := false
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name != store {
				continue
			}
			msgs = append(msgs, ev.Reason+": "+ev.Message)
			found = found || ev.Reason == reason
		}
		return found
	}, 30*time.Second, 100*time.Millisecond, "an Event %s about %s", reason, store)
	return msgs
}

// storeStatus is the store's whole status as JSON, as the tenant reads it.
func storeStatus(t *testing.T, ns, store string) string {
	t.Helper()
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Get(t.Context(), store, metav1.GetOptions{})
	require.NoError(t, err)
	b, err := json.Marshal(u.Object["status"])
	require.NoError(t, err)
	return string(b)
}

// countingServer answers every request with answer and counts them.
func countingServer(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestEndpointRedirectToMetadataReachesNothing: the tenant's endpoint
// (loopback, which this platform allows) answers every request with a
// redirect to a "cloud metadata" server. The operator follows none: no
// request reaches the metadata server, and neither its address nor
// anything of either body reaches the ObjectStore's status or Events.
func TestEndpointRedirectToMetadataReachesNothing(t *testing.T) {
	t.Parallel()
	const metadataSecret = "NODE-CREDENTIALS-AKIAEXAMPLE"
	const redirectMarker = "REDIRECT-BODY-MARKER"
	// Answered as a metadata service answers a request it does not like
	// (GCP's and Azure's without their header): an error whose body quotes.
	metadata, metadataHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<html>%s</html>", metadataSecret)
	})
	target := metadata.URL + "/computeMetadata/v1/instance/service-accounts/default/token"
	redirector, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusTemporaryRedirect)
		fmt.Fprintf(w, "<a href=%q>%s</a>", target, redirectMarker)
	})
	e := newSoloBinEnv(t, "OPERATOR_ALLOWED_UPDATE_ENDPOINTS=127.0.0.0/8")
	endpointTenant(t, e, "redirected", redirector.URL)

	c := waitVersionReason(t, e.tenantNS, "redirected", "TenantUnreachable")
	t.Logf("VersionCurrent: %s", c.Message)
	assert.Contains(t, c.Message, "307")
	assert.Contains(t, c.Message, "redirect")
	events := storeEvents(t, e.tenantNS, "redirected", "TenantUnreachable")
	status := storeStatus(t, e.tenantNS, "redirected")
	assert.Zero(t, metadataHits.Load(), "no request reached the metadata server")
	metadataAddr := strings.TrimPrefix(metadata.URL, "http://")
	for _, leak := range []string{metadataSecret, redirectMarker, metadataAddr} {
		assert.NotContains(t, status, leak, "status")
		for _, ev := range events {
			assert.NotContains(t, ev, leak, "Event")
		}
	}
}

// TestEndpointInAnotherNamespaceIsRefused: with default settings, an
// endpoint naming another namespace's Service, or an address, is refused
// before anything is dialled; VersionCurrent says so and what the platform
// can allow.
func TestEndpointInAnotherNamespaceIsRefused(t *testing.T) {
	t.Parallel()
	local, localHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	})
	e := newSoloBinEnv(t)
	endpointTenant(t, e, "elsewhere", "https://minio.other-ns.svc.cluster.local:9000")
	endpointTenant(t, e, "on-loopback", local.URL)

	c := waitVersionReason(t, e.tenantNS, "elsewhere", "EndpointNotAllowed")
	t.Logf("VersionCurrent: %s", c.Message)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Contains(t, c.Message, "minio.other-ns.svc.cluster.local is not a Service of namespace "+e.tenantNS)
	assert.Contains(t, c.Message, "nothing was dialled")
	assert.Contains(t, c.Message, "OPERATOR_ALLOWED_UPDATE_ENDPOINTS", "the remedy")
	storeEvents(t, e.tenantNS, "elsewhere", "EndpointNotAllowed")

	c = waitVersionReason(t, e.tenantNS, "on-loopback", "EndpointNotAllowed")
	assert.Contains(t, c.Message, "host 127.0.0.1 is an address no allowed network contains")
	assert.Contains(t, c.Message, "OPERATOR_ALLOWED_UPDATE_ENDPOINTS")
	assert.Zero(t, localHits.Load(), "nothing was dialled")
}

// TestServicesLeadingOutOfTheNamespaceAreRefused: a name of the tenant's
// own namespace that leads elsewhere, through an ExternalName Service or
// a Service whose EndpointSlice the tenant wrote by hand (to an address
// of no Pod, or to another namespace's Pod), is refused with
// EndpointNotAllowed saying why, and the address it leads to (a listener
// on the host's address) receives no connection.
func TestServicesLeadingOutOfTheNamespaceAreRefused(t *testing.T) {
	t.Parallel()
	// Counts connections, not requests: the operator speaks TLS to it,
	// which this plain listener would not answer as a request.
	var conns atomic.Int32
	listener := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	listener.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	// On the host's own address: the apiserver refuses loopback and
	// link-local addresses in an EndpointSlice, but any other address of
	// the cluster's network is a tenant's to write.
	l, err := net.Listen("tcp", net.JoinHostPort(hostAddress(t), "0"))
	require.NoError(t, err)
	require.NoError(t, listener.Listener.Close())
	listener.Listener = l
	listener.Start()
	t.Cleanup(listener.Close)
	tcp := l.Addr().(*net.TCPAddr)
	addr, port := tcp.IP.String(), int32(tcp.Port)
	e := newSoloBinEnv(t)
	cs := adminClient(t)
	ns := e.tenantNS

	// Another namespace's Pod.
	other := operatorNamespace(t)
	_, err = cs.CoreV1().Pods(other).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "minio", Image: "minio"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	service := func(name string, spec corev1.ServiceSpec) {
		_, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	slice := func(svc string, ref *corev1.ObjectReference) {
		portName := "api"
		_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc + "-by-hand", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, TargetRef: ref}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	service("alias", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"})
	service("by-hand", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9000}}})
	slice("by-hand", nil)
	service("borrowed", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "api", Port: port}}})
	slice("borrowed", &corev1.ObjectReference{Kind: "Pod", Namespace: other, Name: "victim"})

	endpointTenant(t, e, "alias", fmt.Sprintf("https://alias.%s.svc:9000", ns))
	endpointTenant(t, e, "by-hand", fmt.Sprintf("https://by-hand.%s.svc.cluster.local:9000", ns))
	endpointTenant(t, e, "borrowed", fmt.Sprintf("https://borrowed.%s.svc:%d", ns, port))

	for store, why := range map[string]string{
		"alias":    fmt.Sprintf("Service %s/alias is of type ExternalName", ns),
		"by-hand":  fmt.Sprintf("Service %s/by-hand: address %s is no Pod of namespace %s", ns, addr, ns),
		"borrowed": fmt.Sprintf("Service %s/borrowed: address %s names Pod %s/victim, of another namespace", ns, addr, other),
	} {
		c := waitVersionReason(t, ns, store, "EndpointNotAllowed")
		t.Logf("VersionCurrent of %s: %s", store, c.Message)
		assert.Equal(t, metav1.ConditionUnknown, c.Status)
		assert.Contains(t, c.Message, why)
		assert.Contains(t, c.Message, "nothing was dialled")
		storeEvents(t, ns, store, "EndpointNotAllowed")
	}
	assert.Zero(t, conns.Load(), "the listener received no connection")
}

// hostAddress is an IPv4 address of this machine other than loopback:
// the apiserver refuses loopback addresses in an EndpointSlice. Without
// one the test fails rather than skips: end-to-end tests are never
// skipped in CI.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this test needs an IPv4 address of this machine other than loopback (the apiserver refuses loopback in an EndpointSlice); none found")
	return ""
}
