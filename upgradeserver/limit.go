package upgradeserver

import (
	"net"
	"sync/atomic"
)

// limitListener closes connections accepted past the server's share for
// their party (shares: a total, a cap per party, a part of the total kept
// for the tenants' pods), so that no number of clients that connect and
// stall, nor one client's idle keep-alive connections, can grow the
// server's memory past the total (about 64 KiB a TLS connection) or take
// the connections meant for the others. Closing, unlike x/net/netutil's
// blocking Accept, keeps the accept queue moving: a client refused now
// retries, and one that is served is not stuck behind stalled ones.
type limitListener struct {
	net.Listener
	shares   *shares
	clients  Clients
	rejected func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		who := clientOf(l.clients, c.RemoteAddr())
		// MinIO fails an update whose connection is closed: a namespace
		// with an update in flight is held only to its own share. There
		// are at most as many as updates in flight.
		updating := who.namespace != "" && l.clients.Updating(who.namespace, "")
		if !l.shares.acquire(who, updating) {
			// Counted before the close: a client that sees its connection
			// closed finds it in the metric.
			l.rejected()
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, client: who}, nil
	}
}

// limitedConn is an accepted connection; it knows its party, which every
// request on it counts against (Server's ConnContext).
type limitedConn struct {
	net.Conn
	l      *limitListener
	client client
	// closed makes a second Close (net/http may close twice) free no
	// second slot.
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.shares.release(c.client)
	}
	return c.Conn.Close()
}
