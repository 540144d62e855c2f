package updates

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/testutil"
)

// loopbackTenant is a tenant whose endpoint is srv, on loopback, which the
// platform allowed.
func loopbackTenant(t *testing.T, srv *httptest.Server) *tenant {
	t.Helper()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	p, err := ParseEndpointPolicy("127.0.0.0/8")
	require.NoError(t, err)
	return &tenant{endpoint: u, user: "admin", password: "secret123", policy: p}
}

// serverInfoError asks the tenant's endpoint for server info and returns
// the error as the controller words it into VersionCurrent.
func serverInfoError(t *testing.T, tn *tenant) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := (&Controller{}).serverInfo(ctx, tn)
	require.Error(t, err)
	return err.Error()
}

// TestAdminClientFollowsNoRedirectAndQuotesNoBody: an endpoint that
// redirects to a "metadata" server gets no request through to it, and
// neither the redirect's body nor its Location reaches the error.
func TestAdminClientFollowsNoRedirectAndQuotesNoBody(t *testing.T) {
	const marker = "MARKER-aws-secret-access-key"
	var metadataHits atomic.Int32
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metadataHits.Add(1)
		fmt.Fprintf(w, `{"Code":"Creds","Message":"%s"}`, marker)
	}))
	defer metadata.Close()
	target := metadata.URL + "/latest/meta-data/iam/security-credentials/node"
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusTemporaryRedirect)
		fmt.Fprintf(w, "<a href=%q>%s</a>", target, marker)
	}))
	defer redirector.Close()

	msg := serverInfoError(t, loopbackTenant(t, redirector))
	assert.Zero(t, metadataHits.Load(), "the redirect was not followed")
	assert.Contains(t, msg, "307", "the status code is named")
	assert.Contains(t, msg, "redirect")
	assert.NotContains(t, msg, marker)
	assert.NotContains(t, msg, strings.TrimPrefix(metadata.URL, "http://"), "the Location is not echoed")
}

// TestAdminErrorsQuoteOnlyMinIOsBoundedCodeAndMessage: a body that is not
// MinIO's admin error protocol is replaced by the status; one that is has
// its Code and Message bounded and stripped of control characters.
func TestAdminErrorsQuoteOnlyMinIOsBoundedCodeAndMessage(t *testing.T) {
	const marker = "MARKER-body-text"
	for name, tc := range map[string]struct {
		status      int
		contentType string
		body        string
		want        []string // in the error
		notWant     []string
	}{
		"html": {http.StatusInternalServerError, "text/html", "<html>" + marker + "</html>",
			[]string{"500"}, []string{marker}},
		"json without a code": {http.StatusForbidden, "application/json", `{"Message":"` + marker + `"}`,
			[]string{"403"}, []string{marker}},
		"partial content": {http.StatusPartialContent, "text/plain", marker,
			[]string{"206"}, []string{marker}}, // madmin quotes any answer but 200 as an error
		"binary": {http.StatusBadRequest, "application/octet-stream", "\x00\xff\xfe" + marker,
			[]string{"400"}, []string{marker}},
		"minio json": {http.StatusForbidden, "application/json",
			`{"Code":"AccessDenied","Message":"Access Denied.\u001b[31m\r\nforged line\u202e"}`,
			[]string{"AccessDenied", "Access Denied.", "forged line"}, []string{"\x1b", "\r", "\n", "\u202e"}},
		"minio xml, huge message": {http.StatusForbidden, "application/xml",
			`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>` +
				strings.Repeat("m", 4096) + marker + `</Message></Error>`,
			[]string{"InvalidAccessKeyId", "mmmm"}, []string{marker}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			msg := serverInfoError(t, loopbackTenant(t, srv))
			// Reported by length and excerpt: the message may be huge.
			for _, s := range tc.want {
				assert.True(t, strings.Contains(msg, s), "want %q in %.200q", s, msg)
			}
			for _, s := range tc.notWant {
				assert.False(t, strings.Contains(msg, s), "%q leaked into %.200q", s, msg)
			}
			assert.Less(t, len(msg), 1024, "bounded: %.200q", msg)
		})
	}
}

func TestEndpointPolicyAllowsTheNamespacesServicesAndWhatThePlatformAllows(t *testing.T) {
	for _, tc := range []struct {
		host    string
		allowed string // OPERATOR_ALLOWED_UPDATE_ENDPOINTS
		ok      bool
	}{
		// The namespace rule: a Service, or a pod under a headless one.
		{"tenant-hl.t.svc.cluster.local:9000", "", true}, // the default endpoint
		{"tenant-hl.t.svc:9000", "", true},
		{"tenant-hl.t.svc", "", true},
		{"tenant-pool-0-0.tenant-hl.t.svc.cluster.local:9000", "", true},
		{"tenant-pool-0-0.tenant-hl.t.svc:9000", "", true},
		{"TENANT-HL.T.SVC.Cluster.Local:9000", "", true},
		{"tenant-hl.t.svc.cluster.local.:9000", "", true}, // fully qualified
		{"tenant-hl.t.svc.cluster.local..:9000", "", false},
		{"minio.other-ns.svc.cluster.local:9000", "", false},
		{"minio.other-ns.svc:9000", "", false},
		{"a.b.tenant-hl.t.svc:9000", "", false}, // not a pod name
		{"t.svc:9000", "", false},
		{"tenant-hl.t:9000", "", false},                 // resolved through search paths
		{"tenant-hl.t.svc.example.com:9000", "", false}, // another domain
		{"tenant-hl.t.svc.cluster.local.evil.com:9000", "", false},
		{"tenant_hl.t.svc:9000", "", false},
		{"-x.t.svc:9000", "", false},
		{"tenant-hl.t.svc:0", "", false},
		{"tenant-hl.t.svc:65536", "", false},
		{"tenant-hl.t.svc:http", "", false},
		{"", "", false},
		{":9000", "", false},
		// Addresses: only by CIDR.
		{"127.0.0.1:9000", "", false},
		{"127.0.0.1:9000", "127.0.0.0/8", true},
		{"127.0.0.1:9000", "*.minio.example.com", false},
		{"10.1.2.3:9000", "10.0.0.0/8", true},
		{"11.1.2.3:9000", "10.0.0.0/8", false},
		{"10.1.2.3:9000", "10.1.2.3", true}, // a bare address is a /32
		{"169.254.169.254:80", "10.0.0.0/8", false},
		{"[::1]:9000", "", false},
		{"[::1]:9000", "::1/128", true},
		{"[fd00::5]:9000", "fd00::/8", true},
		{"[FD00::5]:9000", "fd00::/8", true},
		{"[::ffff:127.0.0.1]:9000", "", false},
		{"[::ffff:127.0.0.1]:9000", "127.0.0.0/8", true}, // mapped: judged as IPv4
		{"[fe80::1%eth0]:9000", "fe80::/10", false},      // zoned: never
		{"2130706433:9000", "", false},                   // 127.0.0.1 in decimal is no name
		{"0x7f.1:9000", "", false},
		// Globs: one label per *.
		{"eu.minio.example.com:443", "*.minio.example.com", true},
		{"EU.minio.example.com.:443", "*.minio.example.com", true},
		{"minio.example.com:443", "*.minio.example.com", false},
		{"a.eu.minio.example.com:443", "*.minio.example.com", false},
		{"minio-eu.example.com:443", "minio-*.example.com", true},
		{"minio.example.com:443", "minio.example.com", true},
		{"minio.example.com.evil.com:443", "minio.example.com", false},
		{"minio.other-ns.svc.cluster.local:9000", "10.0.0.0/8, *.other-ns.svc.cluster.local", true},
	} {
		t.Run(tc.host+"/"+tc.allowed, func(t *testing.T) {
			p, err := ParseEndpointPolicy(tc.allowed)
			require.NoError(t, err)
			err = p.allowHost(tc.host, "t", "cluster.local")
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, CauseEndpointNotAllowed, reason.Of(err))
		})
	}
}

func TestEndpointPolicyEntriesAreValidatedNamingTheBadOne(t *testing.T) {
	p, err := ParseEndpointPolicy(" 10.0.0.0/8 ,,*.Minio.Example.com., fd00::/8,192.168.1.7")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.0/8,fd00::/8,192.168.1.7/32,*.minio.example.com", p.String())
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.0/", "minio.example.com:9000", "https://minio.example.com",
		"*.exa mple.com", "min?o.example.com", "a..b", "127.0.0.*", "*", "*.*", "fe80::1%eth0", "::ffff:10.0.0.0/104", strings.Repeat("a", 64) + ".com"} {
		_, err := ParseEndpointPolicy("10.0.0.0/8," + bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", bad), "the error names the entry")
	}
}

func TestDialRefusesLoopbackLinkLocalAndMetadataAddresses(t *testing.T) {
	none, err := ParseEndpointPolicy("")
	require.NoError(t, err)
	for _, a := range []string{"127.0.0.1", "127.1.2.3", "::1", "169.254.169.254", "169.254.0.1", "fe80::1", "fe80::1%eth0",
		"0.0.0.0", "0.1.2.3", "::", "224.0.0.1", "ff02::1", "::ffff:169.254.169.254", "::ffff:127.0.0.1", "fd00:ec2::254", "100.100.100.200"} {
		assert.Error(t, none.allowDial("tcp", net.JoinHostPort(a, "80"), nil), a)
	}
	for _, a := range []string{"10.1.2.3", "192.168.0.5", "fd00::5", "8.8.8.8", "2001:db8::1"} {
		assert.NoError(t, none.allowDial("tcp", net.JoinHostPort(a, "80"), nil), a)
	}
	loop, err := ParseEndpointPolicy("127.0.0.0/8,169.254.169.254/32")
	require.NoError(t, err)
	assert.NoError(t, loop.allowDial("tcp", "127.0.0.1:80", nil), "an allowed network is dialled")
	assert.NoError(t, loop.allowDial("tcp", "[::ffff:127.0.0.1]:80", nil))
	assert.NoError(t, loop.allowDial("tcp", "169.254.169.254:80", nil), "the platform may allow even this")
	assert.Error(t, loop.allowDial("tcp", "[::1]:80", nil))
	assert.Error(t, loop.allowDial("tcp", "169.254.169.253:80", nil))
}

// tenantController is a controller whose platform allowed what allowed
// names, with the configuration Secret of ObjectStore t/tenant.
func tenantController(t *testing.T, allowed string) (*Controller, *fake.Clientset) {
	t.Helper()
	p, err := ParseEndpointPolicy(allowed)
	require.NoError(t, err)
	cs := testutil.Clientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "tenant-env"},
		Data: map[string][]byte{v1.ConfigEnvKey: []byte("export MINIO_ROOT_USER=admin\nexport MINIO_ROOT_PASSWORD=secret123\n")}})
	return &Controller{cfg: Config{Kube: cs, Secrets: apiSecrets{cs}, ClusterDomain: "cluster.local", AllowedEndpoints: p}, metrics: newMetrics(nil)}, cs
}

func storeWithEndpoint(endpoint string) *v1.ObjectStore {
	return &v1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "tenant"}, Spec: v1.ObjectStoreSpec{
		Configuration: &v1.SecretRef{Name: "tenant-env"}, Updates: v1.Updates{Endpoint: endpoint}}}
}

// TestRefusedEndpointIsNeitherDialledNorGivenCredentials: an endpoint the
// policy refuses fails loadTenant before any Secret is read.
func TestRefusedEndpointIsNeitherDialledNorGivenCredentials(t *testing.T) {
	for _, endpoint := range []string{
		"https://minio.other-ns.svc.cluster.local:9000",
		"https://169.254.169.254/latest/meta-data",
		"http://127.0.0.1:9000",
		"https://tenant-hl.t.svc@169.254.169.254:9000", // the host is what follows the @
		"https://admin:hunter2@tenant-hl.t.svc:9000",
	} {
		t.Run(endpoint, func(t *testing.T) {
			c, cs := tenantController(t, "")
			_, err := c.loadTenant(t.Context(), storeWithEndpoint(endpoint))
			require.Error(t, err)
			assert.Equal(t, CauseEndpointNotAllowed, reason.Of(err))
			assert.Contains(t, err.Error(), "spec.updates.endpoint")
			assert.NotContains(t, err.Error(), "hunter2")
			assert.Empty(t, cs.Actions(), "no Secret was read for a refused endpoint")
		})
	}
	c, _ := tenantController(t, "")
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint(""))
	require.NoError(t, err, "the default endpoint passes")
	assert.Equal(t, "tenant-hl.t.svc.cluster.local:9000", tn.endpoint.Host)
}

// TestNodeEndpointsFromServerInfoFollowThePolicy: MinIO's server info is
// the tenant's words too; a node endpoint outside the policy gets no
// admin client, and the refusal keeps its cause through the caller's
// wrapping.
func TestNodeEndpointsFromServerInfoFollowThePolicy(t *testing.T) {
	c, _ := tenantController(t, "")
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint(""))
	require.NoError(t, err)
	_, tr, err := tn.admin("tenant-pool-0-1.tenant-hl.t.svc.cluster.local:9000")
	require.NoError(t, err)
	tr.CloseIdleConnections()
	for _, host := range []string{"169.254.169.254:80", "minio.other-ns.svc:9000", "evil.com/x@tenant-hl.t.svc:9000"} {
		_, _, err = tn.admin(host)
		require.Error(t, err, host)
		assert.Equal(t, CauseEndpointNotAllowed, reason.Of(reason.Wrap(CauseTenantUnreachable, err)), "the specific cause wins")
	}
}

// TestANameThatResolvesToLoopbackIsNotDialled: a name the policy allows
// (as an ExternalName Service in the tenant's namespace would be) that
// resolves to a refused address is stopped at dial time, at once.
func TestANameThatResolvesToLoopbackIsNotDialled(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	c, _ := tenantController(t, "localhost")
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://localhost:"+port))
	require.NoError(t, err, "the name is allowed")
	start := time.Now()
	msg := serverInfoError(t, tn)
	assert.Zero(t, hits.Load(), "nothing was dialled")
	assert.Contains(t, msg, "loopback")
	assert.Less(t, time.Since(start), 5*time.Second, "a refused address is not retried")
}
