// Package upgradeserver serves MinIO binaries to MinIO pods for in-place
// updates: GET /webhook/v1/update lists them, and the files below it are
// laid out the way MinIO's update client expects (minio.<RELEASE>, its
// .sha256sum and .minisig, optionally under <os>-<arch>/).
//
// The server is pure HTTP: it knows nothing of Kubernetes, asks a
// CertificateSource for its certificate on every handshake, and reads
// binaries through a Catalog (binstore's read side).
package upgradeserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/binstore"
)

// CertificateSource provides the serving certificate. It is asked on every
// TLS handshake, so a renewed certificate is served as soon as the source
// has it, without a restart.
type CertificateSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Catalog is the read side of the binary store: immutable snapshots of
// what may be served, and the verified file behind a binary.
type Catalog interface {
	// Current is the latest snapshot; never nil.
	Current() *binstore.Snapshot
	// Open returns the binary's file, or an error if it changed since it
	// was indexed.
	Open(*binstore.Binary) (*os.File, error)
}

var _ Catalog = (*binstore.Store)(nil)

// Config configures a Server.
type Config struct {
	// Address to listen on, e.g. ":4221".
	Address string
	// Certificates provides the TLS certificate. Nil serves plain HTTP,
	// which only an explicit user choice should lead to.
	Certificates CertificateSource
	Store        Catalog
	Metrics      *Metrics
	Log          zerolog.Logger
	// AccessLog receives one line per request (time, method, path, status,
	// bytes, duration, remote, proto), stamped by the server with the time
	// the answer was written, so it needs no timestamp of its own; nil
	// writes none. Metrics count every request either way.
	AccessLog *zerolog.Logger
	// ShutdownGrace is how long running downloads may continue after
	// shutdown begins; zero closes them at once.
	ShutdownGrace time.Duration
	// The bounds below are the operator's to choose (cmd/operator); zero
	// is no bound.

	// StallTimeout drops a download that made no progress for this long;
	// it is also the window MinDownloadRate is measured over.
	StallTimeout time.Duration
	// MinDownloadRate (bytes a second) is what a download must average
	// over each StallTimeout to keep its slot, so a client that trickles
	// cannot hold one for hours; zero: only stalls are dropped.
	MinDownloadRate int64
	// MaxDownloads is how many binary downloads may run at once; more get
	// 503 with Retry-After. Each holds a 256 KiB copy buffer. A pod whose
	// ObjectStore is updating to that binary is let in past it (Clients).
	MaxDownloads int
	// MaxDownloadsPerClient is how many of them one party may run.
	MaxDownloadsPerClient int
	// MaxConnections is how many connections may be open at once; more are
	// closed as soon as they are accepted.
	MaxConnections int
	// MaxConnectionsPerClient is how many of them, idle or not, one party
	// may hold.
	MaxConnectionsPerClient int
	// Clients names the party behind an address (the namespace of a known
	// pod) and which pods are updating; nil: every address is a party of
	// its own and none is known. With it, a quarter of MaxConnections and
	// MaxDownloads is kept for known pods.
	Clients Clients
	// BaseURL is the listing's base for its URLs: the upgrade server as
	// pods reach it, up to UpdatePath. Empty: URLs are paths from the
	// root. The request's Host never enters the listing, so its size
	// depends on the store alone.
	BaseURL string
	// WriteTimeout bounds writing any response that is not a binary (the
	// listing, sidecars, errors): a client that does not read is dropped.
	// Downloads extend it while they progress (StallTimeout).
	WriteTimeout time.Duration
}

// Server is the upgrade server.
type Server struct {
	cfg Config
	// conns is every party's share of MaxConnections.
	conns   *shares
	handler http.Handler
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	log := cfg.Log.With().Str("component", "upgradeserver").Logger()
	var access *zerolog.Logger
	if cfg.AccessLog != nil {
		l := cfg.AccessLog.With().Str("component", "upgradeserver").Logger()
		access = &l
	}
	cfg.Log = log
	reserve := strangersShare
	if cfg.Clients == nil {
		// Every address is a stranger: there is nothing to keep a part for.
		cfg.Clients, reserve = noClients{}, func(int) int { return 0 }
	}
	return &Server{
		cfg:   cfg,
		conns: newShares(cfg.MaxConnections, cfg.MaxConnectionsPerClient, reserve(cfg.MaxConnections)),
		handler: newHandler(&handler{store: cfg.Store, metrics: cfg.Metrics, log: log, access: access, base: cfg.BaseURL,
			stall: cfg.StallTimeout, minRate: cfg.MinDownloadRate, clients: cfg.Clients,
			downloads: newShares(cfg.MaxDownloads, cfg.MaxDownloadsPerClient, reserve(cfg.MaxDownloads))}),
	}
}

// strangersShare is the part of a total that addresses which are no known
// pod may hold together: the last quarter (one at least, from a total of
// two) is kept for the tenants' pods, so that clients from anywhere else,
// however many addresses they have, leave MinIO room to connect and
// download.
func strangersShare(total int) int {
	if total <= 1 {
		return total
	}
	return total - max(1, total/4)
}

// Handler is the server's HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// TLSConfig is the TLS configuration the server uses: TLS 1.2 at least
// (1.3 preferred by Go's negotiation), AEAD cipher suites with forward
// secrecy only, HTTP/1.1 alone. h2 is not offered: its streams would
// multiply every bound on connections (250 handlers a connection by
// default, each held as long as the client's flow-control window stays
// shut), and none of the server's clients needs it: MinIO's update
// client is an http.Transport with its own TLS configuration and dialer,
// which speaks HTTP/1.1 only, and curl falls back to HTTP/1.1 by ALPN
// (docs/upgrade-server.md).
func TLSConfig(src CertificateSource) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: src.GetCertificate,
		NextProtos:     []string{"http/1.1"},
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

// Protocols is what the server speaks: HTTP/1.1 alone, over TLS or not
// (TLSConfig says why not h2).
func Protocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// Run listens on the configured address and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("upgrade server listen on %s: %w", s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: new
// connections are refused and running downloads get ShutdownGrace to
// finish before their connections are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln = &limitListener{Listener: ln, shares: s.conns, clients: s.cfg.Clients, rejected: s.cfg.Metrics.rejectedConns.Inc}
	srv := &http.Server{
		Protocols:         Protocols(),
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Requests carry no body; this bounds a client that trickles one.
		ReadTimeout: 30 * time.Second,
		// Every response has a write deadline; a download pushes its own
		// forward while the client reads (progressWriter).
		WriteTimeout:   s.cfg.WriteTimeout,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       newErrorLog(s.cfg.Log),
		BaseContext:    func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		// Every request counts against its connection's party.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if lc, ok := c.(*limitedConn); ok {
				ctx = context.WithValue(ctx, clientKey{}, lc.client)
			}
			return s.cfg.Metrics.requests.connContext(ctx, c)
		},
	}
	scheme := "http"
	if s.cfg.Certificates != nil {
		srv.TLSConfig = TLSConfig(s.cfg.Certificates)
		scheme = "https"
	} else {
		s.cfg.Log.Warn().Msg("upgrade server is serving PLAIN HTTP: no certificate source was configured")
	}

	errc := make(chan error, 1)
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		errc <- err
	}()
	s.cfg.Log.Info().Str("address", ln.Addr().String()).Str("scheme", scheme).Str("path", UpdatePath).Msg("upgrade server listening")

	select {
	case err := <-errc:
		return fmt.Errorf("upgrade server: %w", err)
	case <-ctx.Done():
	}
	s.cfg.Log.Info().Stringer("grace", s.cfg.ShutdownGrace).Msg("upgrade server shutting down; letting running downloads finish")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.cfg.Log.Warn().Msg("shutdown grace period over; closing remaining connections")
		err = srv.Close()
	}
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("upgrade server: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("upgrade server shutdown: %w", err)
	}
	return nil
}
