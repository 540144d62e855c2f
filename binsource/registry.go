package binsource

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"

	"github.com/object-store-operator/operator/internal/netguard"
)

// canonicalHost is the form of a registry host (host[:port]) that two
// spellings of one registry share: lower case, no trailing dot, the
// scheme's default port spelled out, IP addresses in their shortest form.
func canonicalHost(host string, plainHTTP bool) string {
	h := strings.ToLower(strings.TrimSpace(host))
	name, port, err := net.SplitHostPort(h)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ""
	}
	name = strings.TrimSuffix(name, ".")
	if port == "" {
		port = "443"
		if plainHTTP {
			port = "80"
		}
	}
	if ip := net.ParseIP(name); ip != nil {
		name = ip.String()
	}
	return net.JoinHostPort(name, port)
}

// Resolver looks host names up; net.DefaultResolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// registryKey is what a pull from the registry at canonical host counts
// against for the per-registry share of slots, and the one address it
// dials (RegistryDialer): the lowest address the name resolves to, on the
// registry's port. Two names of one server so meet on one key, and a name
// that also claims other servers' addresses (DNS is the tenant's) counts
// against only the one it connects to. A name that does not resolve
// within timeout, or an address, counts as itself.
func registryKey(ctx context.Context, r Resolver, timeout time.Duration, canonical string) string {
	name, port, err := net.SplitHostPort(canonical)
	if err != nil || net.ParseIP(name) != nil || r == nil {
		return canonical
	}
	ctx, cancel := withBound(ctx, timeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return canonical
	}
	var keys []string
	for _, a := range addrs {
		a, _, _ = strings.Cut(a, "%") // an IPv6 zone names no other server
		if ip := net.ParseIP(a); ip != nil {
			keys = append(keys, net.JoinHostPort(ip.String(), port))
		}
	}
	if len(keys) == 0 {
		return canonical
	}
	return slices.Min(keys)
}

// pullTarget marks a pull's requests and connections with its registry's
// canonical host, so the transport, the dialer and the error words tell
// the registry's answers from other hosts', and the address that host was
// counted against (registryKey; the host itself when it did not resolve).
type pullTarget struct{ host, addr string }

type pullTargetKey struct{}

func withPullTarget(ctx context.Context, t *pullTarget) context.Context {
	return context.WithValue(ctx, pullTargetKey{}, t)
}

// targetOf is the pull ctx is for, nil for none (a mirror download).
func targetOf(ctx context.Context) *pullTarget {
	t, _ := ctx.Value(pullTargetKey{}).(*pullTarget)
	return t
}

// RegistryDialer is the DialContext of the transport registries are pulled
// through. For a pull's connections it dials the registry's host at the
// address its slot was counted against, so a pull holds the share of the
// server it talks to; and refuses, for any other host the registry sends
// the operator to (a redirect, a token service), a loopback, link-local
// (cloud metadata), unspecified or multicast address other than the
// registry's own: the tenant chose the registry, not what else answers on
// the operator's node. Connections of no pull are dialled as d would.
func RegistryDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t := targetOf(ctx)
		if t == nil {
			return d.DialContext(ctx, network, addr)
		}
		if canonicalHost(addr, false) == t.host {
			if _, _, err := net.SplitHostPort(t.addr); err == nil && t.addr != t.host {
				addr = t.addr
			}
			return d.DialContext(ctx, network, addr)
		}
		own, _ := netip.ParseAddrPort(t.addr)
		guarded := *d
		guarded.Control = func(network, address string, c syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &refusedAddress{addr: bounded(address, 256), kind: "unparseable"}
			}
			a := ap.Addr().Unmap().WithZone("")
			if kind := netguard.RefusedKind(a); kind != "" && a != own.Addr().Unmap().WithZone("") {
				return &refusedAddress{addr: a.String(), kind: kind}
			}
			if d.Control != nil {
				return d.Control(network, address, c)
			}
			return nil
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// refusedAddress is a connection RegistryDialer did not make.
type refusedAddress struct{ addr, kind string }

func (e *refusedAddress) Error() string {
	return fmt.Sprintf("refused to connect to %s, a %s address other than the registry's own", e.addr, e.kind)
}

// isRegistryRequest reports whether req went to its pull's registry
// itself (not to a host it redirected to or named as its token service).
// Requests of no pull (a mirror download) are the operator's own.
func isRegistryRequest(req *http.Request) bool {
	t := targetOf(req.Context())
	return t == nil || canonicalHost(req.URL.Host, req.URL.Scheme == "http") == t.host
}

// knownTokenService is the token service known to stand for a registry on
// another host: Docker Hub's. Any other registry's must be on its own host.
func knownTokenService(registryName string) string {
	switch registryName {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "auth.docker.io"
	}
	return ""
}

// ownTokenService refuses a token request (a pull's request neither to
// its registry nor a redirect: a Bearer challenge's realm) to a host
// other than the registry's own, on any port, or its known token service.
// The realm is the tenant's word: followed anywhere, it makes the
// operator fetch a token from a server only it reaches and hand it to the
// tenant's registry.
func ownTokenService(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Response != nil || isRegistryRequest(req) {
			return next.RoundTrip(req)
		}
		own, _, _ := net.SplitHostPort(targetOf(req.Context()).host)
		realm, _, _ := net.SplitHostPort(canonicalHost(req.URL.Host, req.URL.Scheme == "http"))
		if realm == own || (realm != "" && knownTokenService(own) == realm) {
			return next.RoundTrip(req)
		}
		return nil, reasonf(errAuth, "the registry names %s as its token service; tokens are asked of the registry's own host (%s, any port) only",
			bounded(req.URL.Host, 256), bounded(own, 256))
	})
}

// quietElsewhere keeps what hosts other than the pull's registry answer
// (a redirect's, the token service's: maybe servers only the operator
// reaches) out of conditions: a redirect that fails ends the pull with the
// same words whatever happened, so a condition cannot probe what answers
// where; an error answer of the token service keeps its status (a 401 is
// AuthFailed) but loses its body. Successful answers are read as data,
// never quoted.
func quietElsewhere(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if isRegistryRequest(req) || (err == nil && resp.StatusCode < 400) {
			return resp, err
		}
		if req.Response != nil { // a redirect
			cause := err
			if err == nil {
				resp.Body.Close()
				cause = fmt.Errorf("%s answered %s", req.URL.Redacted(), resp.Status)
			}
			return nil, pullError(errPull, fmt.Sprintf(
				"the registry redirected to %s, which could not be used (what it answered is in the operator's log only)", bounded(req.URL.Host, 256)), cause)
		}
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		resp.Body, resp.ContentLength = http.NoBody, 0
		return resp, nil
	})
}

// originalRequest is the request a redirect chain started from.
func originalRequest(req *http.Request) *http.Request {
	for i := 0; i < 20 && req.Response != nil && req.Response.Request != nil; i++ {
		req = req.Response.Request
	}
	return req
}

// withBound is ctx with a deadline d from now; d <= 0 is no bound.
func withBound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// keychain resolves registry credentials from image pull Secrets, the
// same Secrets a PodSpec's imagePullSecrets names, with kubelet's rules
// (go-containerregistry's Kubernetes keychain): wildcard hosts
// (*.example.com), path-scoped entries (registry/team), the most specific
// match first.
type keychain struct {
	authn.Keychain
	id string // stable identity of the credentials, for sharing fetches
}

// newKeychain reads kubernetes.io/dockerconfigjson (and legacy
// kubernetes.io/dockercfg) Secrets. As kubelet does, it goes by the
// Secret's type; a Secret of another type is an error here rather than
// silently anonymous, so the ObjectStore's condition can name it.
func newKeychain(secrets []*corev1.Secret) (*keychain, error) {
	var names []string
	pull := make([]corev1.Secret, 0, len(secrets))
	for _, s := range secrets {
		names = append(names, s.Namespace+"/"+s.Name+"@"+s.ResourceVersion)
		switch {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(s.Data[corev1.DockerConfigJsonKey]) > 0:
		case s.Type == corev1.SecretTypeDockercfg && len(s.Data[corev1.DockerConfigKey]) > 0:
		default:
			return nil, fmt.Errorf("pull Secret %s/%s is neither of type %s with %s nor of type %s with %s",
				s.Namespace, s.Name, corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, corev1.SecretTypeDockercfg, corev1.DockerConfigKey)
		}
		pull = append(pull, *s)
	}
	kc, err := k8schain.NewFromPullSecrets(context.Background(), pull)
	if err != nil {
		return nil, fmt.Errorf("pull Secrets %s: %w", strings.Join(names, ", "), err)
	}
	sort.Strings(names)
	return &keychain{Keychain: kc, id: strings.Join(names, ",")}, nil
}

// usesCredentials reports whether a pull of repo is made with credentials
// from the ObjectStore's pull Secrets (anything but anonymous). Only such
// a pull can be private; see Fetcher.needsCredentials. An error resolving
// the credentials counts as credentials.
func usesCredentials(kc authn.Keychain, repo name.Repository) bool {
	auth, err := kc.Resolve(repo)
	if err != nil {
		return true
	}
	if auth == authn.Anonymous {
		return false
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return true
	}
	return cfg != nil && *cfg != (authn.AuthConfig{})
}
