package registryguard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

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
