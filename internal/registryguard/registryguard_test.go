package registryguard

import (
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

	"github.com/object-store-operator/operator/internal/reason"
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
		assert.Equal(t, tt.want, CanonicalHost(tt.host, tt.plainHTTP), tt.host)
	}
}

// TestTokensAreAskedOfTheRegistrysOwnHostOnly: a pull's request that is
// neither to its registry nor a redirect is a token request; it goes out
// only to the registry's own host name (any port) or Docker Hub's known
// token service, and is refused as AuthFailed elsewhere.
func TestTokensAreAskedOfTheRegistrysOwnHostOnly(t *testing.T) {
	ask := func(registry, realm string) error {
		u, err := url.Parse(realm)
		require.NoError(t, err)
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(WithTarget(t.Context(), &Target{Host: CanonicalHost(registry, false)}))
		_, err = OwnTokenService(RoundTripperFunc(func(*http.Request) (*http.Response, error) {
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
		assert.Equal(t, "AuthFailed", reason.Of(err))
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
	dial := Dialer(&net.Dialer{Timeout: time.Second})
	try := func(target *Target, addr string) error {
		c, err := dial(WithTarget(t.Context(), target), "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	remote := &Target{Host: "registry.example:443", Addr: "192.0.2.1:443"}
	assert.ErrorContains(t, try(remote, "127.0.0.1:"+port), "refused to connect to 127.0.0.1, a loopback address")
	assert.ErrorContains(t, try(remote, "localhost:"+port), "a loopback address")
	assert.ErrorContains(t, try(remote, "169.254.169.254:80"), "link-local")
	local := &Target{Host: "127.0.0.1:1", Addr: "127.0.0.1:1"}
	assert.NoError(t, try(local, "127.0.0.1:"+port), "another port of a registry on loopback")
	pinned := &Target{Host: "registry.example:" + port, Addr: "127.0.0.1:" + port}
	assert.NoError(t, try(pinned, "registry.example:"+port), "the registry's name, dialled at its counted address without a lookup")
	assert.NoError(t, try(nil, "127.0.0.1:"+port), "no pull: the mirror")
}

// TestAManifestOfRealSizePassesTheShapeCheck: the counts leave room for any
// real index or manifest.
func TestAManifestOfRealSizePassesTheShapeCheck(t *testing.T) {
	// It shares nothing and measures no memory: it runs beside the others.
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"schemaVersion":2,"manifests":[`)
	for i := range MaxManifestArray {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"mediaType":"m","digest":"sha256:%064d","size":1,"platform":{"os":"linux","architecture":"amd64"},"annotations":{"a":"b"}}`, i)
	}
	b.WriteString(`]}`)
	require.NoError(t, checkManifestShape([]byte(b.String()), "the index"))
	err := checkManifestShape([]byte(`{"a":`+strings.Repeat("[", 40)+strings.Repeat("]", 40)+`}`), "the index")
	assert.ErrorContains(t, err, "nests deeper than 32 levels")
	err = checkManifestShape([]byte(`{"annotations":{`+strings.Repeat(`"k":"v",`, MaxManifestValues)+`"k":"v"}}`), "the index")
	assert.ErrorContains(t, err, "more than 65536 JSON values")
}

// TestOnlyTheRegistrysOwnBoundedErrorsReachAMessage: the words of a
// failure quote the registry's errors[] code and message, bounded, and
// nothing else a server said: no raw body, no detail, nothing from another
// host (a redirect, a token service).
func TestOnlyTheRegistrysOwnBoundedErrorsReachAMessage(t *testing.T) {
	const secret = "SECRET"
	registry := CanonicalHost("registry.example", false)
	answer := func(rawURL string, status int, body string) error {
		u, err := url.Parse(rawURL)
		require.NoError(t, err)
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(WithTarget(t.Context(), &Target{Host: registry}))
		resp, err := QuietElsewhere(RoundTripperFunc(func(*http.Request) (*http.Response, error) {
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
			err := Classify("get", answer(tt.url, tt.status, tt.body))
			assert.Equal(t, tt.reason, reason.Of(err))
			assert.NotContains(t, err.Error(), secret)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.Less(t, len(err.Error()), 1500)
			assert.Contains(t, Detail(err), "GET "+tt.url, "the log has the whole")
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
			Response: &http.Response{Request: &http.Request{URL: from}}}).WithContext(WithTarget(t.Context(), &Target{Host: registry}))
		_, err := QuietElsewhere(RoundTripperFunc(func(*http.Request) (*http.Response, error) { return there() })).RoundTrip(hop)
		err = Classify("get", &url.Error{Op: "Get", URL: to.String(), Err: err})
		assert.Equal(t, "PullFailed", reason.Of(err))
		assert.Equal(t, "get: the registry redirected to internal.svc:8443, which could not be used (what it answered is in the operator's log only)", err.Error())
	}

	// go-containerregistry's own texts quote bodies ("no token in bearer
	// response:\n<body>"): they are not repeated.
	err = Classify("get", fmt.Errorf("no token in bearer response:\n%s", secret))
	assert.Equal(t, "get: the answer of the registry could not be used (the operator's log has the detail)", err.Error())
	assert.Contains(t, Detail(err), secret)
	// The operator's own words stay whole, whatever wraps them.
	own := refuse(ReasonTooLarge, "the manifest at r/v2/x is larger than 4194304 bytes")
	err = Classify("get", fmt.Errorf("reading manifest %s: %w", secret, own))
	assert.Equal(t, "get: ImageTooLarge: the manifest at r/v2/x is larger than 4194304 bytes", err.Error())
	assert.Equal(t, "ImageTooLarge", reason.Of(err))
}
