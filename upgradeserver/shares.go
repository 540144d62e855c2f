package upgradeserver

import (
	"context"
	"net"
	"net/netip"
	"sync"
)

// Clients says who is behind a source address, so that what a client may
// hold of the server is counted per party, not per connection: every pod
// of a namespace is one party, and any other address is a party of its
// own. cmd/operator answers it from a trimmed Pod informer and the
// ObjectStores' status; the server never talks to Kubernetes itself.
type Clients interface {
	// Namespace is the namespace of the pod at addr; "" when no known pod
	// has that address.
	Namespace(addr netip.Addr) string
	// Updating reports whether an ObjectStore in namespace has an in-place
	// update to the binary with this SHA-256 in flight (to any binary when
	// sha256 is ""): its pods get their connections and that download
	// whatever else the server is doing, held only to their own share.
	Updating(namespace, sha256 string) bool
}

// client is the party a connection counts against.
type client struct {
	// key names the party: "ns/<namespace>" or "ip/<address>".
	key string
	// namespace is set when the address is a known pod.
	namespace string
}

// noClients knows no pod: every address is its own party.
type noClients struct{}

func (noClients) Namespace(netip.Addr) string  { return "" }
func (noClients) Updating(string, string) bool { return false }

// clientOf names the party behind a remote address.
func clientOf(clients Clients, remote net.Addr) client {
	var addr netip.Addr
	if tcp, ok := remote.(*net.TCPAddr); ok {
		addr = tcp.AddrPort().Addr().Unmap()
	} else if ap, err := netip.ParseAddrPort(remote.String()); err == nil {
		addr = ap.Addr().Unmap()
	}
	if ns := clients.Namespace(addr); ns != "" {
		return client{key: "ns/" + ns, namespace: ns}
	}
	return client{key: "ip/" + addr.String()}
}

type clientKey struct{}

// clientFrom is the party a request's connection counts against; a
// handler used without a listener (tests, embedding) is one anonymous
// party.
func clientFrom(ctx context.Context) client {
	c, _ := ctx.Value(clientKey{}).(client)
	return c
}

// shares holds what each party has of one resource (connections,
// downloads) against a total and a cap per party, so no one party can take
// what is meant for the others. Zero bounds are no bound.
type shares struct {
	mu sync.Mutex
	// total is what the server allows in all; perClient, what one party
	// may hold of it.
	total, perClient int
	// strangers is what parties that are not known pods may hold together:
	// the rest of total is kept for the tenants' pods.
	strangers int
	held      int
	heldBy    map[string]int
	// heldByStrangers counts the part of held that strangers hold.
	heldByStrangers int
}

func newShares(total, perClient, strangers int) *shares {
	return &shares{total: total, perClient: perClient, strangers: strangers, heldBy: map[string]int{}}
}

// acquire takes one unit for c. A priority unit is not held to the total
// (the caller bounds how many there can be), only to c's own cap.
func (s *shares) acquire(c client, priority bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient > 0 && s.heldBy[c.key] >= s.perClient {
		return false
	}
	if !priority {
		if s.total > 0 && s.held >= s.total {
			return false
		}
		if c.namespace == "" && s.strangers > 0 && s.heldByStrangers >= s.strangers {
			return false
		}
	}
	s.held++
	s.heldBy[c.key]++
	if c.namespace == "" {
		s.heldByStrangers++
	}
	return true
}

// release returns a unit acquire gave c.
func (s *shares) release(c client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	if n := s.heldBy[c.key] - 1; n > 0 {
		s.heldBy[c.key] = n
	} else {
		delete(s.heldBy, c.key)
	}
	if c.namespace == "" {
		s.heldByStrangers--
	}
}
