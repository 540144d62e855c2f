package binsource

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// canonicalHost is the form of a registry host (host[:port]) that two
// spellings of one registry share: lower case, no trailing dot, the
// scheme's default port spelled out (443, or 80 for a plain-HTTP
// registry), IP addresses in their shortest form. "Registry.example",
// "registry.example:443" and "registry.example.:443" are one registry.
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

// maxRegistryAddresses bounds the keys one registry counts against.
const maxRegistryAddresses = 16

// registryKeys are what a pull from the registry at canonical host
// (canonicalHost's form) counts against for the per-registry share of
// pull slots: every address the name resolves to, on the registry's port,
// so an address and a name of one server, or two names of it, share their
// slots. A name that does not resolve within timeout counts as itself.
func registryKeys(ctx context.Context, r Resolver, timeout time.Duration, canonical string) []string {
	name, port, err := net.SplitHostPort(canonical)
	if err != nil || net.ParseIP(name) != nil || r == nil {
		return []string{canonical}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	if err != nil || len(addrs) == 0 {
		return []string{canonical}
	}
	var keys []string
	for _, a := range addrs {
		a, _, _ = strings.Cut(a, "%") // an IPv6 zone names no other server
		if ip := net.ParseIP(a); ip != nil {
			keys = append(keys, net.JoinHostPort(ip.String(), port))
		}
	}
	if len(keys) == 0 {
		return []string{canonical}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return keys[:min(len(keys), maxRegistryAddresses)]
}

// registryHostKey marks a pull's requests with its registry's canonical
// host, so the transport and the error words can tell the registry's
// answers from other hosts'.
type registryHostKey struct{}

func withRegistryHost(ctx context.Context, canonical string) context.Context {
	return context.WithValue(ctx, registryHostKey{}, canonical)
}

// isRegistryRequest reports whether req went to its pull's registry
// itself (not to a host it redirected to or named as its token service).
// Requests of no pull (a mirror download) are the operator's own.
func isRegistryRequest(req *http.Request) bool {
	registry, ok := req.Context().Value(registryHostKey{}).(string)
	return !ok || canonicalHost(req.URL.Host, req.URL.Scheme == "http") == registry
}

// quietElsewhere keeps what hosts other than the pull's registry answer
// out of conditions. Such a host is one the registry sent the operator to
// (a redirect) or named as its token service, and may be a server only
// the operator can reach:
//   - a redirect that fails (no connection, a certificate, an error
//     status) ends the pull with the same words whatever happened, so
//     the condition cannot be used to probe what answers where;
//   - an error answer of the token service keeps its status (a 401 is
//     AuthFailed) but loses its body before anything reads it.
//
// Successful answers (blobs redirected to object storage, tokens) are
// read as data, never quoted.
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
			return nil, &pullError{reason: errPull, cause: cause, public: fmt.Sprintf(
				"the registry redirected to %s, which could not be used (what it answered is in the operator's log only)", bounded(req.URL.Host, 256))}
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
