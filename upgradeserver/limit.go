package upgradeserver

import (
	"net"
	"sync/atomic"
)

// limitListener closes connections accepted while max are open, so that
// no number of clients that connect and stall can grow the server's
// memory past max connections' worth (about 64 KiB each with TLS).
// Closing, unlike x/net/netutil's blocking Accept, keeps the accept queue
// moving: a client refused now retries, and one that is served is not
// stuck behind stalled ones.
type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	rejected func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			// Counted before the close: a client that sees its connection
			// closed finds it in the metric.
			l.rejected()
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

type limitedConn struct {
	net.Conn
	l *limitListener
	// closed makes a second Close (net/http may close twice) free no
	// second slot.
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
