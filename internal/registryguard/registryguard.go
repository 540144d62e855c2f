// Package registryguard is how the operator talks to a registry a tenant
// chose without the registry reaching anything else through it: HTTPS
// only, unless listed as insecure; one address dialled per pull and no
// local address for the hosts it sends the operator to; tokens asked of
// its own host only; manifests and layers bounded before they are decoded;
// and of its
// failures, only the operator's words and the registry's own bounded
// errors[] reach what a tenant reads (Classify).
package registryguard

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/klauspost/compress/zstd"

	"github.com/object-store-operator/operator/internal/netguard"
	"github.com/object-store-operator/operator/internal/reason"
)

// The reasons a guard refuses for, or Classify files a failure under (the
// Reason of the *reason.Error).
const (
	ReasonNotTrusted     = "RegistryNotTrusted"
	ReasonAuthFailed     = "AuthFailed"
	ReasonNotFound       = "ImageNotFound"
	ReasonTimeout        = "PullTimeout"
	ReasonDigestMismatch = "ChecksumMismatch" // binstore.ReasonChecksumMismatch, met in transit
	ReasonPullFailed     = "PullFailed"
	ReasonTooLarge       = "ImageTooLarge"
)

// refuse is a refusal worded by the operator, safe to show whole.
func refuse(r, format string, args ...any) error {
	return &reason.Error{Reason: r, Message: r + ": " + fmt.Sprintf(format, args...)}
}

// CanonicalHost is the one spelling of a registry host[:port]: lower
// case, no trailing dot, the default port spelled out, IPs shortest.
func CanonicalHost(host string, plainHTTP bool) string {
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

// Key is the one address a pull from the registry dials and
// counts against for its registry's share of slots: the lowest address the
// name resolves to, so two names of one server meet on one key, and a name
// that also claims other servers' addresses (DNS is the tenant's) counts
// against only the one it connects to. A name that does not resolve in
// time counts as itself.
func Key(ctx context.Context, r Resolver, timeout time.Duration, canonical string) string {
	name, port, err := net.SplitHostPort(canonical)
	if err != nil || net.ParseIP(name) != nil || r == nil {
		return canonical
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
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

// Target marks a pull's requests and connections with its registry's
// canonical host and the address it was counted against (Key), so the
// transport, the dialer and the error words tell the registry from others.
type Target struct{ Host, Addr string }

type targetKey struct{}

// WithTarget marks ctx's requests and connections as t's; nil: no pull's
// (a mirror download), dialled and read as is.
func WithTarget(ctx context.Context, t *Target) context.Context {
	return context.WithValue(ctx, targetKey{}, t)
}

// targetOf is the pull ctx is for, nil for none (a mirror download).
func targetOf(ctx context.Context) *Target {
	t, _ := ctx.Value(targetKey{}).(*Target)
	return t
}

// Dialer dials a pull's registry at the address its slot was
// counted against, and refuses, for any other host the registry sends the
// operator to (a redirect, a token service), the addresses netguard names
// other than the registry's own: the tenant chose the registry, not what
// else answers on the operator's node. Other connections are d's.
func Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		t := targetOf(ctx)
		if t == nil {
			return d.DialContext(ctx, network, addr)
		}
		if CanonicalHost(addr, false) == t.Host {
			if _, _, err := net.SplitHostPort(t.Addr); err == nil && t.Addr != t.Host {
				addr = t.Addr
			}
			return d.DialContext(ctx, network, addr)
		}
		own, _ := netip.ParseAddrPort(t.Addr)
		guarded := *d
		guarded.Control = func(network, address string, c syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &refusedAddress{addr: Bounded(address, 256), kind: "unparseable"}
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

// refusedAddress is a connection Dialer did not make.
type refusedAddress struct{ addr, kind string }

func (e *refusedAddress) Error() string {
	return fmt.Sprintf("refused to connect to %s, a %s address other than the registry's own", e.addr, e.kind)
}

// FromRegistry reports whether req went to its pull's registry itself
// or is no pull's (a mirror download).
func FromRegistry(req *http.Request) bool {
	t := targetOf(req.Context())
	return t == nil || CanonicalHost(req.URL.Host, req.URL.Scheme == "http") == t.Host
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

// OwnTokenService refuses a token request (a Bearer challenge's realm) to
// a host other than the registry's own (any port) or its known token
// service: followed anywhere, the tenant's realm makes the operator fetch
// a token from a server only it reaches and hand it to the registry.
func OwnTokenService(next http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Response != nil || FromRegistry(req) {
			return next.RoundTrip(req)
		}
		own, _, _ := net.SplitHostPort(targetOf(req.Context()).Host)
		realm, _, _ := net.SplitHostPort(CanonicalHost(req.URL.Host, req.URL.Scheme == "http"))
		if realm == own || (realm != "" && knownTokenService(own) == realm) {
			return next.RoundTrip(req)
		}
		return nil, refuse(ReasonAuthFailed, "the registry names %s as its token service; tokens are asked of the registry's own host (%s, any port) only",
			Bounded(req.URL.Host, 256), Bounded(own, 256))
	})
}

// QuietElsewhere keeps what hosts other than the pull's registry answer
// (maybe servers only the operator reaches) out of conditions, so a
// condition cannot probe what answers where: a failed redirect ends the
// pull with the same words whatever happened; the token service's error
// keeps its status (a 401 is AuthFailed), not its body.
func QuietElsewhere(next http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if FromRegistry(req) || (err == nil && resp.StatusCode < 400) {
			return resp, err
		}
		if req.Response != nil { // a redirect
			cause := err
			if err == nil {
				resp.Body.Close()
				cause = fmt.Errorf("%s answered %s", req.URL.Redacted(), resp.Status)
			}
			return nil, &reason.Error{Reason: ReasonPullFailed, Err: cause, Message: fmt.Sprintf(
				"the registry redirected to %s, which could not be used (what it answered is in the operator's log only)", Bounded(req.URL.Host, 256))}
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

// MaxManifestSize caps a manifest, read whole: go-containerregistry reads
// up to 100 MiB. Registries accept manifests of at least 4 MiB (OCI
// distribution spec); MinIO's are a few KiB.
const MaxManifestSize = 4 << 20

// What a manifest may hold, counted before it is decoded: 4 MiB of "{},"
// is 1.4 million descriptors, about 480 MiB decoded.
const (
	MaxManifestArray  = 1024    // elements of any one array (manifests, layers, ...)
	MaxManifestValues = 1 << 16 // JSON values of the whole document
	maxManifestDepth  = 32
)

// BoundedManifests caps manifest responses at MaxManifestSize, refusing a
// larger Content-Length before any byte is read.
func BoundedManifests(next http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		orig := originalRequest(req) // redirected, still a manifest
		if err != nil || !strings.Contains(orig.URL.Path, "/manifests/") {
			return resp, err
		}
		what := "the manifest at " + Bounded(orig.URL.Host+orig.URL.Path, 512)
		if resp.ContentLength > MaxManifestSize {
			resp.Body.Close()
			return nil, refuse(ReasonTooLarge, "%s is %d bytes; at most %d are read", what, resp.ContentLength, MaxManifestSize)
		}
		capped := http.MaxBytesReader(nil, resp.Body, MaxManifestSize)
		if resp.StatusCode != http.StatusOK || req.Method == http.MethodHead { // errors: 64 KiB read
			resp.Body = capped
			return resp, nil
		}
		// Read whole (as go-containerregistry would) to count it before decoding.
		body, err := io.ReadAll(capped)
		resp.Body.Close()
		if errors.As(err, new(*http.MaxBytesError)) {
			err = refuse(ReasonTooLarge, "%s is larger than %d bytes", what, MaxManifestSize)
		}
		if err == nil {
			err = checkManifestShape(body, what)
		}
		if err != nil {
			return nil, err
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return resp, nil
	})
}

// checkManifestShape refuses a manifest whose arrays, values or nesting
// exceed what one of MinIO's could hold, streaming tokens and holding
// nothing but the nesting. Malformed JSON is left to the parser.
func checkManifestShape(body []byte, what string) error {
	type level struct {
		array     bool
		key       string // the object key the container is the value of
		elements  int
		expectKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []level
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // not JSON: the manifest parser says what is wrong
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		key := ""
		if top != nil && !top.array {
			if top.expectKey {
				top.key, top.expectKey = tok.(string), false
				continue
			}
			top.expectKey = true
			key = top.key
		}
		if values++; values > MaxManifestValues {
			return refuse(ReasonTooLarge, "%s holds more than %d JSON values", what, MaxManifestValues)
		}
		if top != nil && top.array {
			key = top.key
			if top.elements++; top.elements > MaxManifestArray {
				return refuse(ReasonTooLarge, "%s lists more than %d %s", what, MaxManifestArray, Bounded(fmt.Sprintf("%q entries", key), 80))
			}
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= maxManifestDepth {
				return refuse(ReasonTooLarge, "%s nests deeper than %d levels", what, maxManifestDepth)
			}
			stack = append(stack, level{array: d == '[', key: key, expectKey: d == '{'})
		}
	}
}

// MaxZstdWindow is the largest zstd window a layer may declare: the
// decoder holds the window a frame header chooses (a 16 KiB layer
// declaring 512 MiB made every replica allocate that). 8 MiB is what the
// format asks every decoder to support and zstd levels up to 19 use; only
// --long or --ultra needs more.
const MaxZstdWindow = 8 << 20

// Decompress recognises gzip and zstd layers by their magic bytes; other
// layers are plain tar. zstd's window is checked in the first frame's
// header before the decoder exists (so the message can name it), in later
// ones by the decoder.
func Decompress(r *bufio.Reader) (io.ReadCloser, error) {
	magic, _ := r.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		zr.Multistream(false) // the caller reads and hashes the blob's end
		return zr, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		head, _ := r.Peek(zstd.HeaderMaxSize)
		var h zstd.Header
		if err := h.Decode(head); err == nil && !h.Skippable {
			window := h.WindowSize
			if h.SingleSegment {
				window = h.FrameContentSize
			}
			if window > MaxZstdWindow {
				return nil, refuse(ReasonTooLarge, "its zstd frame declares a window of %s; at most %s is decoded", mib(window), mib(MaxZstdWindow))
			}
		}
		zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderMaxMemory(MaxZstdWindow), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return zstdReader{zr}, nil
	}
	return io.NopCloser(r), nil
}

// zstdReader words the decoder's refusal of a later frame's window.
type zstdReader struct{ *zstd.Decoder }

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.Decoder.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = refuse(ReasonTooLarge, "a zstd frame declares a window over %s; at most %s is decoded", mib(MaxZstdWindow), mib(MaxZstdWindow))
	}
	return n, err
}

func (z zstdReader) Close() error {
	z.Decoder.Close()
	return nil
}

// mib renders a size in whole MiB when it is one, else in bytes.
func mib(n uint64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatUint(n>>20, 10) + " MiB"
	}
	return strconv.FormatUint(n, 10) + " bytes"
}

// HTTPSOnly refuses plain HTTP to registries not listed as insecure:
// go-containerregistry falls back to it for private addresses whenever
// HTTPS fails, certificate errors included.
func HTTPSOnly(next http.RoundTripper, insecure []string) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Scheme != "https" && !slices.Contains(insecure, req.URL.Host) {
			return nil, refuse(ReasonNotTrusted, "refusing plain HTTP to registry %s (it is not listed as insecure)", Bounded(req.URL.Host, 256))
		}
		return next.RoundTrip(req)
	})
}

// RoundTripperFunc is a function as an http.RoundTripper.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Bounded keeps the first max runes of s that print, as one line: what a
// server or a tenant named reaches a message only so.
func Bounded(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError {
			continue
		}
		if n == max {
			b.WriteString("...")
			break
		}
		if !unicode.IsPrint(r) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// The operator reaches networks the tenant cannot (a registry may be,
// redirect to or name as its token service an in-cluster server), so a
// condition holds only the operator's words and the pull's own registry's
// errors[], bounded. Raw bodies, other hosts' answers and
// go-containerregistry's texts (which quote bodies) go to the log only.

// Detail is everything known about err, bounded, for the operator's log.
func Detail(err error) string {
	var re *reason.Error
	if errors.As(err, &re) && re.Err != nil {
		return Bounded(re.Err.Error(), 4096)
	}
	return Bounded(err.Error(), 4096)
}

// Classify turns an error of what (the operator's words: "get <image>")
// into a *reason.Error whose message a tenant may read and whose cause
// the log has.
func Classify(what string, err error) error {
	if err == nil {
		return nil
	}
	// Errors worded here already keep their words, whatever wrapped them.
	var re *reason.Error
	if errors.As(err, &re) {
		return &reason.Error{Reason: re.Reason, Message: what + ": " + re.Error(), Err: err}
	}
	r, public := describe(err)
	return &reason.Error{Reason: r, Message: what + ": " + public, Err: err}
}

// describe says what went wrong in the operator's words.
func describe(err error) (string, string) {
	var terr *transport.Error
	var uerr *url.Error
	var nerr net.Error
	host := "the registry"
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil && u.Host != "" {
			host = Bounded(u.Host, 256)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout, "timed out waiting for " + host
	case errors.Is(err, context.Canceled):
		return ReasonPullFailed, "canceled"
	case errors.As(err, &terr):
		return statusReason(terr), describeStatus(terr)
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return ReasonNotTrusted, "the certificate of " + host + " is signed by an authority the operator does not trust"
	case errors.As(err, new(x509.HostnameError)):
		return ReasonNotTrusted, "the certificate of " + host + " is not valid for that name"
	case errors.As(err, new(x509.CertificateInvalidError)):
		return ReasonNotTrusted, "the certificate of " + host + " is not valid (expired, not yet valid, or not for serving)"
	case errors.As(err, new(*tls.CertificateVerificationError)):
		return ReasonNotTrusted, "the certificate of " + host + " does not verify"
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonPullFailed, host + " refused the connection"
	case errors.As(err, new(*net.DNSError)):
		return ReasonPullFailed, "the name of " + host + " does not resolve"
	case errors.As(err, &nerr) && nerr.Timeout():
		return ReasonPullFailed, "timed out talking to " + host
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return ReasonPullFailed, host + " closed the connection early"
	case errors.As(err, new(tls.RecordHeaderError)):
		return ReasonPullFailed, host + " does not answer TLS"
	case errors.As(err, new(*json.SyntaxError)), errors.As(err, new(*json.UnmarshalTypeError)):
		return ReasonPullFailed, "an answer of " + host + " is not the JSON a registry sends"
	case strings.Contains(err.Error(), "does not match requested digest"), strings.Contains(err.Error(), "error verifying sha256 checksum"):
		return ReasonDigestMismatch, "what " + host + " sent does not match its digest"
	case uerr != nil:
		return ReasonPullFailed, "could not talk to " + host
	}
	return ReasonPullFailed, "the answer of " + host + " could not be used (the operator's log has the detail)"
}

// statusReason maps a registry's answer onto a reason.
func statusReason(terr *transport.Error) string {
	if r := StatusReason(terr.StatusCode); r != ReasonPullFailed {
		return r
	}
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return ReasonNotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return ReasonAuthFailed
		}
	}
	return ReasonPullFailed
}

// StatusReason maps an HTTP status onto a reason.
func StatusReason(code int) string {
	switch code {
	case http.StatusNotFound:
		return ReasonNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return ReasonAuthFailed
	}
	return ReasonPullFailed
}

// Bounds of what a registry's errors[] contributes to a message.
const (
	maxRegistryErrors   = 3
	maxRegistryCode     = 64
	maxRegistryErrorMsg = 256
)

// describeStatus is "<host> answered <status>", with the first few
// errors[] codes and messages when the pull's registry itself answered.
func describeStatus(terr *transport.Error) string {
	host, fromRegistry := "the registry", false
	if req := terr.Request; req != nil {
		host = Bounded(req.URL.Host, 256)
		fromRegistry = FromRegistry(req)
	}
	if !fromRegistry { // the token service (QuietElsewhere ends redirects); its body was never read
		return fmt.Sprintf("the registry's token service %s answered %d %s", host, terr.StatusCode, http.StatusText(terr.StatusCode))
	}
	s := fmt.Sprintf("%s answered %d %s", host, terr.StatusCode, http.StatusText(terr.StatusCode))
	var said []string
	for _, d := range terr.Errors {
		if len(said) == maxRegistryErrors {
			said = append(said, fmt.Sprintf("and %d more", len(terr.Errors)-maxRegistryErrors))
			break
		}
		code := Bounded(string(d.Code), maxRegistryCode)
		if msg := Bounded(d.Message, maxRegistryErrorMsg); msg != "" {
			code += ": " + msg
		}
		said = append(said, code)
	}
	if len(said) > 0 {
		s += " (" + strings.Join(said, "; ") + ")"
	}
	return s
}
