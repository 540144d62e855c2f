package updates

// Which hosts the admin client may reach, and what of their answers may
// reach a condition. spec.updates.endpoint and the node endpoints of
// MinIO's server info are the tenant's words: without a policy one tenant
// could aim the operator's client at another namespace's MinIO, at the
// cluster's internals, or at a node's cloud metadata service, and read the
// answer back in its own status.

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/object-store-operator/operator/internal/netguard"
	"github.com/object-store-operator/operator/internal/reason"
)

// EndpointPolicy is what the platform allows the admin client to reach
// beyond the rule every ObjectStore gets: a Service of its own namespace,
// or a pod under a headless one. Its zero value allows only that rule.
type EndpointPolicy struct {
	// nets allow addresses: an address literal as host, and a dialled
	// address of the kinds refused at dial time.
	nets []netip.Prefix
	// globs allow names: lower-case, no trailing dot, each * standing
	// for part of one label.
	globs []string
}

// ParseEndpointPolicy reads comma-separated CIDRs (a bare address is a
// single-address network) and host globs (*.minio.example.com). Empty
// entries are skipped; an entry that is neither is an error naming it.
func ParseEndpointPolicy(list string) (EndpointPolicy, error) {
	var p EndpointPolicy
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if err := p.add(entry); err != nil {
			return EndpointPolicy{}, fmt.Errorf("has an entry %q that %w", entry, err)
		}
	}
	return p, nil
}

func (p *EndpointPolicy) add(entry string) error {
	if strings.Contains(entry, "/") {
		if strings.Contains(entry, "://") {
			return errors.New("is a URL: entries are CIDRs (10.0.0.0/8) or host globs (*.minio.example.com), any port")
		}
		pfx, err := netip.ParsePrefix(entry)
		if err != nil {
			return fmt.Errorf("is not a CIDR such as 10.0.0.0/8 or fd00::/8: %w", err)
		}
		if pfx.Addr().Is4In6() {
			// Dialled addresses are unmapped before they are matched, so
			// this network would never match anything.
			return errors.New("is an IPv4-mapped IPv6 network: write it as an IPv4 CIDR")
		}
		p.nets = append(p.nets, pfx.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(entry); err == nil {
		if a.Zone() != "" || a.Is4In6() {
			return errors.New("is an address with a zone or an IPv4-mapped one: write a plain address or CIDR")
		}
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if strings.Contains(entry, ":") {
		return errors.New("has a port, or is not an address: entries name hosts, which are allowed on any port")
	}
	glob := strings.TrimSuffix(strings.ToLower(entry), ".")
	if err := checkName(glob, true); err != nil {
		return fmt.Errorf("is not a host glob such as *.minio.example.com: %w", err)
	}
	p.globs = append(p.globs, glob)
	return nil
}

// String lists the networks, then the globs, as they are matched.
func (p EndpointPolicy) String() string {
	parts := make([]string, 0, len(p.nets)+len(p.globs))
	for _, n := range p.nets {
		parts = append(parts, n.String())
	}
	return strings.Join(append(parts, p.globs...), ",")
}

// maxHostInMessage bounds how much of a host the tenant wrote is quoted
// back in a refusal.
const maxHostInMessage = 256

// allowHost checks hostport (host[:port], from a URL or from MinIO's
// server info) for an ObjectStore in namespace ns: an address only by an
// allowed network; a name by the namespace rule
// (<service>.<ns>.svc[.<clusterDomain>] or
// <pod>.<service>.<ns>.svc[.<clusterDomain>]) or an allowed glob. Its
// error has the cause CauseEndpointNotAllowed.
func (p EndpointPolicy) allowHost(hostport, ns, clusterDomain string) error {
	_, err := p.route(hostport, ns, clusterDomain)
	return err
}

// serviceTarget is a host allowed by the namespace rule alone: a Service
// of the ObjectStore's namespace, or one of its endpoints by hostname.
// The operator resolves it through the API, never by DNS (resolve).
type serviceTarget struct {
	namespace, service string
	// pod is the endpoint's hostname of <pod>.<service>.<ns>.svc; ""
	// for the Service itself.
	pod string
	// only keeps, of the Service's endpoints, the one of Pod only, its
	// port mapped as the Service's are: one node asked through the
	// Service's name and port (the maintenance check).
	only string
}

// route is allowHost that also says how the host is reached: nil for a
// host the platform allowed (an address in an allowed network, a name an
// allowed glob matches), dialled as written; else the Service target
// of the namespace rule. The platform's list is matched first: what it
// allows is dialled as it always was.
func (p EndpointPolicy) route(hostport, ns, clusterDomain string) (*serviceTarget, error) {
	host, err := splitHostPort(hostport)
	if err != nil {
		return nil, reason.Errorf(CauseEndpointNotAllowed, "%q is not a host[:port]: %v", cleanText(hostport, maxHostInMessage), err)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() == "" && p.allowsAddr(a) {
			return nil, nil
		}
		return nil, reason.Errorf(CauseEndpointNotAllowed, "host %s is an address no allowed network contains (addresses are allowed only by CIDR); nothing was dialled",
			cleanText(a.String(), maxHostInMessage))
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkName(name, false); err != nil {
		return nil, reason.Errorf(CauseEndpointNotAllowed, "host %q is not a host name: %v", cleanText(host, maxHostInMessage), err)
	}
	if p.allowsName(name) {
		return nil, nil
	}
	if target, ok := inNamespace(name, ns, strings.TrimSuffix(strings.ToLower(clusterDomain), ".")); ok {
		return target, nil
	}
	domain := ""
	if clusterDomain != "" {
		domain = ", optionally followed by ." + clusterDomain
	}
	return nil, reason.Errorf(CauseEndpointNotAllowed,
		"host %s is not a Service of namespace %s (<service>.%[2]s.svc, or <pod>.<service>.%[2]s.svc%[3]s) and no allowed host glob matches it; nothing was dialled",
		name, ns, domain)
}

// splitHostPort returns the host of host[:port]; a port must be a number
// from 1 to 65535.
func splitHostPort(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: the whole is the host (an IPv6 address only bracketed
		// with a port, as in a URL).
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
	}
	if host == "" {
		return "", errors.New("no host")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q is not a number from 1 to 65535", cleanText(port, 16))
		}
	}
	return host, nil
}

// checkName accepts a lower-case DNS name (with * in labels when glob):
// labels of letters, digits and inner hyphens, at most 63 bytes each and
// 253 in all, the last with a letter or hyphen: all digits (or all *) it
// reads as an address to some resolvers (2130706433, 0x7f.1), and a glob
// such as 10.0.0.* or * would stand for one.
func checkName(name string, glob bool) error {
	if name == "" || len(name) > 253 {
		return errors.New("empty or longer than 253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("a label is empty or longer than 63 bytes")
		}
		for i, r := range l {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			case r == '-' && i > 0 && i < len(l)-1:
			case r == '*' && glob:
			default:
				return fmt.Errorf("label %q has a character other than a-z, 0-9 or an inner -", cleanText(l, 64))
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789*") == "" {
		return errors.New("its last label has no letter, as in an address (addresses are allowed by CIDR)")
	}
	return nil
}

// inNamespace is the rule every ObjectStore gets: the name is a Service of
// its namespace, or a pod under a headless Service of it. It returns
// which.
func inNamespace(name, ns, clusterDomain string) (*serviceTarget, bool) {
	if ns == "" {
		return nil, false
	}
	if short, ok := strings.CutSuffix(name, ".svc."+clusterDomain); ok && clusterDomain != "" {
		name = short + ".svc"
	}
	rest, ok := strings.CutSuffix(name, "."+ns+".svc")
	if !ok {
		return nil, false
	}
	// Labels are checked non-empty.
	switch labels := strings.Split(rest, "."); len(labels) {
	case 1:
		return &serviceTarget{namespace: ns, service: labels[0]}, true
	case 2:
		return &serviceTarget{namespace: ns, service: labels[1], pod: labels[0]}, true
	}
	return nil, false
}

func (p EndpointPolicy) allowsName(name string) bool {
	labels := strings.Split(name, ".")
	for _, g := range p.globs {
		gl := strings.Split(g, ".")
		if len(gl) != len(labels) {
			continue
		}
		match := true
		for i := range gl {
			// Only * is special: checkName refused [, ? and \ in globs.
			if ok, _ := path.Match(gl[i], labels[i]); !ok {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func (p EndpointPolicy) allowsAddr(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// allowDial is the dialer's Control: whatever a name resolved to (a
// name the platform allowed, or a Pod address a Service led to), the
// operator connects to no loopback, link-local (cloud metadata),
// unspecified or multicast address unless an allowed network contains it.
func (p EndpointPolicy) allowDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedAddress{addr: cleanText(address, maxHostInMessage), kind: "unparseable"}
	}
	a := ap.Addr().Unmap().WithZone("")
	kind := netguard.RefusedKind(a)
	if kind == "" || p.allowsAddr(a) {
		return nil
	}
	return &refusedAddress{addr: a.String(), kind: kind}
}

// refusedAddress is a connection the dialer did not make.
type refusedAddress struct{ addr, kind string }

func (e *refusedAddress) Error() string {
	return fmt.Sprintf("refused to connect to %s, a %s address no allowed network contains", e.addr, e.kind)
}

// Is makes the refusal a refused connection: madmin gives up at once on
// ECONNREFUSED and retries any other network error ten times, and asking
// again would not change the answer.
func (e *refusedAddress) Is(target error) bool { return target == syscall.ECONNREFUSED }

// Bounds of what a tenant's endpoint can put into a condition.
const (
	// maxAdminErrorBody is read of a non-2xx body: MinIO's errors are a
	// few hundred bytes.
	maxAdminErrorBody = 64 << 10
	// maxErrorField bounds the Code and the Message quoted from it.
	maxErrorField = 256
)

// Codes of the errors the transport puts in place of an answer.
const (
	codeRedirected = "EndpointRedirected"
	codeUnexpected = "UnexpectedResponse"
	codeTooLarge   = "AnswerTooLarge"
)

// limitedBodies is the admin client's RoundTripper. It caps a 200's body
// at maxAdminResponse bytes, follows no redirect (a 3xx becomes an error
// naming only its status; the client sees no Location), and replaces
// every other body by MinIO's admin error, Code and Message
// bounded and stripped of control characters, or by an error naming only
// the status when the body is not one. madmin quotes up to 1 KiB of a body
// it cannot parse into its errors, which land in the condition and Event
// the tenant reads: here nothing else can.
type limitedBodies struct{ rt http.RoundTripper }

func (l limitedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	code := resp.StatusCode
	switch {
	case code == http.StatusOK:
		// The only answer the calls made here take as success; madmin
		// quotes any other, a 204 or 206 included, as an error. Its shape
		// is bounded before madmin decodes it: 8 MiB of "{}," would be
		// millions of empty servers, gigabytes once decoded.
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminResponse+1))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the admin API's answer: %w", err)
		}
		// Refused as an answer madmin does not retry (an error here would
		// be fetched and scanned again ten times).
		resp.StatusCode = http.StatusUnprocessableEntity
		if len(body) > maxAdminResponse {
			return adminErrorResponse(resp, codeTooLarge, fmt.Sprintf("the endpoint's answer is larger than %d MiB", maxAdminResponse>>20)), nil
		}
		if _, ok := jsonObjectsWithin(body, maxAdminObjects); !ok {
			return adminErrorResponse(resp, codeTooLarge, fmt.Sprintf("the endpoint's answer holds more than %d JSON objects", maxAdminObjects)), nil
		}
		resp.StatusCode = http.StatusOK
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		return resp, nil
	case code >= 300 && code < 400:
		resp.Body.Close()
		return adminErrorResponse(resp, codeRedirected,
			fmt.Sprintf("the endpoint answered HTTP %d, a redirect; the operator follows none", code)), nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAdminErrorBody))
	resp.Body.Close()
	errCode, msg, ok := parseAdminError(body)
	if !ok {
		errCode, msg = codeUnexpected, fmt.Sprintf("the endpoint answered HTTP %d with a body that is not a MinIO admin error", code)
	}
	return adminErrorResponse(resp, errCode, msg), nil
}

// adminErrorResponse is resp with only its status code kept (its status
// text and headers are the endpoint's words too) and a MinIO admin error
// as body, which madmin parses into its ErrorResponse.
func adminErrorResponse(resp *http.Response, code, msg string) *http.Response {
	body, _ := json.Marshal(struct{ Code, Message string }{code, msg})
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode)),
		StatusCode:    resp.StatusCode,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       resp.Request,
	}
}

// parseAdminError reads MinIO's admin error protocol, JSON or XML (an
// <Error> element): a Code, and a Message. ok is false when body is not
// one or its Code is empty once cleaned.
func parseAdminError(body []byte) (code, msg string, ok bool) {
	var e struct {
		XMLName xml.Name `xml:"Error" json:"-"`
		Code    string
		Message string
	}
	if err := json.Unmarshal(body, &e); err != nil {
		if err := xml.Unmarshal(body, &e); err != nil {
			return "", "", false
		}
	}
	code = cleanText(e.Code, maxErrorField)
	return code, cleanText(e.Message, maxErrorField), code != ""
}

// cleanText makes s safe to quote: valid UTF-8, each run of control or
// format characters (escape sequences, line breaks, bidi overrides) one
// space, at most max bytes.
func cleanText(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
		if b.Len() > max {
			break
		}
	}
	out := b.String()
	if len(out) <= max {
		return out
	}
	const cut = "…"
	out = out[:max-len(cut)]
	for !utf8.ValidString(out) {
		out = out[:len(out)-1]
	}
	return out + cut
}

// maxAdminObjects bounds the JSON objects one answer of a tenant's admin
// API may hold: a server info of a thousand nodes with their drives fits,
// and what the decoder then builds stays within tens of MiB.
const maxAdminObjects = 1 << 17

// jsonObjectsWithin counts the objects in data, a JSON document, without
// building them, and says whether there are at most limit (it stops
// counting past it). A document that does not parse is left for the
// decoder to refuse.
func jsonObjectsWithin(data []byte, limit int) (int, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n, true
		}
		if d, ok := tok.(json.Delim); ok && d == '{' {
			if n++; n > limit {
				return n, false
			}
		}
	}
}
