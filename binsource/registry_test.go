package binsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistryHostsAreCanonical(t *testing.T) {
	for _, tt := range []struct {
		host      string
		plainHTTP bool
		want      string
	}{
		{"registry.example", false, "registry.example:443"},
		{"registry.example:443", false, "registry.example:443"},
		{"Registry.EXAMPLE.:443", false, "registry.example:443"},
		{"registry.example:5000", false, "registry.example:5000"},
		{"registry.example", true, "registry.example:80"},
		{"registry.example:80", true, "registry.example:80"},
		{"10.0.0.1", false, "10.0.0.1:443"},
		{"[::1]:5000", false, "[::1]:5000"},
		{"[0:0::1]", false, "[::1]:443"},
		{"[::ffff:10.0.0.1]:443", false, "10.0.0.1:443"},
	} {
		assert.Equal(t, tt.want, canonicalHost(tt.host, tt.plainHTTP), tt.host)
	}
}

type fakeResolver map[string][]string

func (r fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	if host == "slow.example" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// TestAnAddressAndANameOfOneServerShareRegistryKeys: the key a pull counts
// against is the lowest address behind the name (so 127.0.0.1 and
// localhost meet, and so do two names of one server); a name that does
// not resolve, or not in time, counts as itself.
func TestAnAddressAndANameOfOneServerShareRegistryKeys(t *testing.T) {
	r := fakeResolver{
		"localhost":        {"::1", "127.0.0.1", "127.0.0.1"},
		"registry.example": {"10.0.0.2", "10.0.0.1", "fe80::1%eth0"},
		"other.example":    {"fe80::1%eth1", "10.0.0.1"},
	}
	key := func(host string) string {
		return registryKey(t.Context(), r, 50*time.Millisecond, canonicalHost(host, false))
	}
	assert.Equal(t, "127.0.0.1:5000", key("127.0.0.1:5000"))
	assert.Equal(t, "127.0.0.1:5000", key("localhost:5000"))
	assert.Equal(t, "10.0.0.1:443", key("REGISTRY.example"))
	assert.Equal(t, key("registry.example"), key("other.example"))
	assert.Equal(t, key("registry.example"), key("registry.example:443"))
	assert.Equal(t, "unknown.example:443", key("unknown.example"))
	assert.Equal(t, "slow.example:443", key("slow.example"), "a lookup that does not answer in time")
}

// TestOnlyTheRegistrysOwnBoundedErrorsReachAMessage: the words of a
// failure quote the registry's errors[] code and message, bounded, and
// nothing else a server said: no raw body, no detail, nothing from another
// host (a redirect, a token service).
func TestOnlyTheRegistrysOwnBoundedErrorsReachAMessage(t *testing.T) {
	const secret = "SECRET"
	registry := canonicalHost("registry.example", false)
	answer := func(rawURL string, status int, body string) error {
		u, err := url.Parse(rawURL)
		require.NoError(t, err)
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(withPullTarget(t.Context(), &pullTarget{host: registry}))
		resp, err := quietElsewhere(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})).RoundTrip(req)
		require.NoError(t, err)
		return transport.CheckError(resp, http.StatusOK)
	}
	long := strings.Repeat("m", 1000) + secret
	for _, tt := range []struct {
		name, url string
		status    int
		body      string
		reason    string
		says      []string
	}{
		{"raw body", "https://registry.example/v2/x/manifests/t", 500, "stack trace " + secret, "PullFailed",
			[]string{"get: registry.example answered 500 Internal Server Error"}},
		{"errors[]", "https://registry.example:443/v2/x/manifests/t", 404,
			`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"x":"` + secret + `"}}]}`, "ImageNotFound",
			[]string{"registry.example:443 answered 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"}},
		{"long errors[]", "https://registry.example/v2/x/manifests/t", 400,
			`{"errors":[` + strings.Repeat(`{"code":"`+strings.Repeat("C", 100)+`","message":"`+long+`"},`, 5) + `{"code":"X"}]}`, "PullFailed",
			[]string{strings.Repeat("C", maxRegistryCode) + "...: " + strings.Repeat("m", maxRegistryErrorMsg) + "...", "and 3 more"}},
		{"token service", "https://auth.internal.svc/token", 401, `{"errors":[{"code":"DENIED","message":"` + secret + `"}]}`, "AuthFailed",
			[]string{"get: the registry's token service auth.internal.svc answered 401 Unauthorized"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := classify("get", answer(tt.url, tt.status, tt.body))
			assert.Equal(t, tt.reason, reasonOf(err))
			assert.NotContains(t, err.Error(), secret)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.Less(t, len(err.Error()), 1500)
			assert.Contains(t, detail(err), "GET "+tt.url, "the log has the whole")
		})
	}

	// A redirect to another host that fails says the same whatever
	// happened there: an error status, or no answer at all.
	from, err := url.Parse("https://registry.example/v2/x/manifests/t")
	require.NoError(t, err)
	to, err := url.Parse("https://internal.svc:8443/anything")
	require.NoError(t, err)
	for _, there := range []func() (*http.Response, error){
		func() (*http.Response, error) {
			return &http.Response{StatusCode: 404, Status: "404 Not Found", Body: io.NopCloser(strings.NewReader(secret))}, nil
		},
		func() (*http.Response, error) { return nil, syscall.ECONNREFUSED },
		func() (*http.Response, error) { return nil, errors.New("x509: certificate is valid for " + secret) },
	} {
		hop := (&http.Request{Method: http.MethodGet, URL: to, Header: http.Header{},
			Response: &http.Response{Request: &http.Request{URL: from}}}).WithContext(withPullTarget(t.Context(), &pullTarget{host: registry}))
		_, err := quietElsewhere(roundTripperFunc(func(*http.Request) (*http.Response, error) { return there() })).RoundTrip(hop)
		err = classify("get", &url.Error{Op: "Get", URL: to.String(), Err: err})
		assert.Equal(t, "PullFailed", reasonOf(err))
		assert.Equal(t, "get: the registry redirected to internal.svc:8443, which could not be used (what it answered is in the operator's log only)", err.Error())
	}

	// go-containerregistry's own texts quote bodies ("no token in bearer
	// response:\n<body>"): they are not repeated.
	err = classify("get", fmt.Errorf("no token in bearer response:\n%s", secret))
	assert.Equal(t, "get: the answer of the registry could not be used (the operator's log has the detail)", err.Error())
	assert.Contains(t, detail(err), secret)
	// The operator's own words stay whole, whatever wraps them.
	own := reasonf(errImageTooLarge, "the manifest at r/v2/x is larger than 4194304 bytes")
	err = classify("get", fmt.Errorf("reading manifest %s: %w", secret, own))
	assert.Equal(t, "get: ImageTooLarge: the manifest at r/v2/x is larger than 4194304 bytes", err.Error())
	assert.Equal(t, "ImageTooLarge", reasonOf(err))
}

// TestTokensAreAskedOfTheRegistrysOwnHostOnly: a pull's request that is
// neither to its registry nor a redirect is a token request; it goes out
// only to the registry's own host name (any port) or Docker Hub's known
// token service, and is refused as AuthFailed elsewhere.
func TestTokensAreAskedOfTheRegistrysOwnHostOnly(t *testing.T) {
	ask := func(registry, realm string) error {
		u, err := url.Parse(realm)
		require.NoError(t, err)
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(withPullTarget(t.Context(), &pullTarget{host: canonicalHost(registry, false)}))
		_, err = ownTokenService(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		})).RoundTrip(req)
		return err
	}
	for _, tt := range []struct {
		registry, realm string
		asked           bool
	}{
		{"quay.io", "https://quay.io/v2/auth", true},
		{"registry.example:5000", "https://REGISTRY.example./token", true},
		{"registry.example", "https://registry.example:8443/token", true},
		{"127.0.0.1:5000", "https://127.0.0.1:5001/token", true},
		{"index.docker.io", "https://auth.docker.io/token", true},
		{"127.0.0.1:5000", "https://localhost:5001/token", false},
		{"registry.example", "https://auth.registry.example/token", false},
		{"registry.example", "https://169.254.169.254/token", false},
		{"evil.example", "https://auth.docker.io/token", false},
	} {
		err := ask(tt.registry, tt.realm)
		if tt.asked {
			assert.NoError(t, err, "%s → %s", tt.registry, tt.realm)
			continue
		}
		require.Error(t, err, "%s → %s", tt.registry, tt.realm)
		assert.Equal(t, "AuthFailed", reasonOf(err))
		assert.Contains(t, err.Error(), "as its token service")
	}
}

// TestAPullDialsNoLocalAddressButItsRegistrys: for hosts other than the
// pull's registry (a redirect, a token service) the dialer refuses
// loopback and link-local addresses, unless the address is the
// registry's own; the registry's host is dialled at its counted address.
func TestAPullDialsNoLocalAddressButItsRegistrys(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	dial := RegistryDialer(&net.Dialer{Timeout: time.Second})
	try := func(target *pullTarget, addr string) error {
		c, err := dial(withPullTarget(t.Context(), target), "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	remote := &pullTarget{host: "registry.example:443", addr: "192.0.2.1:443"}
	assert.ErrorContains(t, try(remote, "127.0.0.1:"+port), "refused to connect to 127.0.0.1, a loopback address")
	assert.ErrorContains(t, try(remote, "localhost:"+port), "a loopback address")
	assert.ErrorContains(t, try(remote, "169.254.169.254:80"), "link-local")
	local := &pullTarget{host: "127.0.0.1:1", addr: "127.0.0.1:1"}
	assert.NoError(t, try(local, "127.0.0.1:"+port), "another port of a registry on loopback")
	pinned := &pullTarget{host: "registry.example:" + port, addr: "127.0.0.1:" + port}
	assert.NoError(t, try(pinned, "registry.example:"+port), "the registry's name, dialled at its counted address without a lookup")
	assert.NoError(t, try(nil, "127.0.0.1:"+port), "no pull: the mirror")
}
