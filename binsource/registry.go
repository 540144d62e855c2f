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

// canonicalHost is the one spelling of a registry host[:port]: lower
// case, no trailing dot, the default port spelled out, IPs shortest.
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

// registryKey is the one address a pull from the registry dials and
// counts against for its registry's share of slots: the lowest address the
// name resolves to, so two names of one server meet on one key, and a name
// that also claims other servers' addresses (DNS is the tenant's) counts
// against only the one it connects to. A name that does not resolve in
// time counts as itself.
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
// canonical host and the address it was counted against, so the
// transport, the dialer and the error words tell the registry from others.
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

// RegistryDialer dials a pull's registry at the address its slot was
// counted against, and refuses, for any other host the registry sends the
// operator to (a redirect, a token service), the addresses netguard names
// other than the registry's own: the tenant chose the registry, not what
// else answers on the operator's node. Other connections are d's.
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

// isRegistryRequest reports whether req went to its pull's registry itself
// or is no pull's (a mirror download).
func isRegistryRequest(req *http.Request) bool {
	t := targetOf(req.Context())
	return t == nil || canonicalHost(req.URL.Host, req.URL.Scheme == "http") == t.host
}

// knownTokenService is Docker Hub's token service, the one known on
// another host than its registry.
func knownTokenService(registryName string) string {
	switch registryName {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "auth.docker.io"
	}
	return ""
}

// ownTokenService refuses a token request (a Bearer challenge's realm) to
// a host other than the registry's own (any port) or its known token
// service: followed anywhere, the tenant's realm makes the operator fetch
// a token from a server only it reaches and hand it to the registry.
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
// (maybe servers only the operator reaches) out of conditions, so a
// condition cannot probe what answers where: a failed redirect ends the
// pull with the same words whatever happened; the token service's error
// keeps its status (a 401 is AuthFailed), not its body.
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

// keychain resolves registry credentials from image pull Secrets with
// kubelet's rules (go-containerregistry's Kubernetes keychain).
type keychain struct {
	authn.Keychain
	id string // stable identity of the credentials, for sharing fetches
}

// newKeychain reads dockerconfigjson (and legacy dockercfg) Secrets by
// their type, as kubelet does; another type is an error rather than
// silently anonymous, so the condition can name it.
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
// (an error resolving them counts as credentials).
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
