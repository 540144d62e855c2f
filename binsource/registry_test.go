package binsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/internal/registryguard"
)

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
		return registryguard.Key(t.Context(), r, 50*time.Millisecond, registryguard.CanonicalHost(host, false))
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
	registry := registryguard.CanonicalHost("registry.example", false)
	answer := func(rawURL string, status int, body string) error {
		u, err := url.Parse(rawURL)
		require.NoError(t, err)
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(registryguard.WithTarget(t.Context(), &registryguard.Target{Host: registry}))
		resp, err := registryguard.QuietElsewhere(registryguard.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
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
			Response: &http.Response{Request: &http.Request{URL: from}}}).WithContext(registryguard.WithTarget(t.Context(), &registryguard.Target{Host: registry}))
		_, err := registryguard.QuietElsewhere(registryguard.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return there() })).RoundTrip(hop)
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
