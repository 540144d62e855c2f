package upgradeserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/internal/logging"
)

// These benchmarks guide work on the upgrade server's hot paths without a
// second server to compare with; make bench (hack/bench.sh) gives the
// figures against nginx. The client runs in the same process, so ns/op is
// both sides' cost; compare runs of one benchmark, not benchmarks.

type fixedCert struct{ cert *tls.Certificate }

func (f fixedCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.cert, nil }

// benchServer serves a store with one release over TLS with an ECDSA
// P-256 certificate (as make bench does), with the operator's metrics
// registered and the access log going to io.Discard as it would to a
// batched stderr.
func benchServer(b *testing.B) (addr string, pool *x509.CertPool) {
	b.Helper()
	dir := b.TempDir()
	writeRelease(b, dir, "linux-amd64", release, []byte("amd64 binary"))
	access := zerolog.New(io.Discard)
	return tlsServer(b, dir, Config{AccessLog: &access})
}

// BenchmarkHandshake is one new TLS 1.3 connection per operation, one GET
// of the listing with Connection: close, as wrk's "full handshakes" run.
// resumed offers the previous session's ticket, as wrk (and MinIO's
// clients) do; full offers none.
func BenchmarkHandshake(b *testing.B) {
	addr, pool := benchServer(b)
	req := []byte("GET " + UpdatePath + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	for _, tt := range []struct {
		name  string
		cache tls.ClientSessionCache
	}{{"resumed", tls.NewLRUClientSessionCache(1)}, {"full", nil}} {
		b.Run(tt.name, func(b *testing.B) {
			cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13, ClientSessionCache: tt.cache}
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				c, err := tls.Dial("tcp", addr, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatal(resp, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				c.Close()
			}
		})
	}
}

// BenchmarkListing is GETs of the listing on one keep-alive TLS
// connection per goroutine, as wrk's listing run.
func BenchmarkListing(b *testing.B) {
	addr, pool := benchServer(b)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}, MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	url := "https://" + addr + UpdatePath
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatal(resp, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkListingHandler is the handler alone (routing, metrics, the
// access line, the write): the part of a listing request that is the
// operator's own code.
func BenchmarkListingHandler(b *testing.B) {
	dir := b.TempDir()
	writeRelease(b, dir, "linux-amd64", release, []byte("amd64 binary"))
	access := zerolog.New(io.Discard)
	h := New(Config{Store: newTestStore(b, dir), Metrics: NewMetrics(prometheus.NewRegistry()), Log: zerolog.Nop(), AccessLog: &access}).Handler()
	req := httptest.NewRequest(http.MethodGet, UpdatePath, nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// reportCPU adds cpu-ns/op, the process's user and system CPU time per
// operation: on a machine shared with other work it varies less than the
// wall-clock ns/op.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkListingHandlerParallel is the handler on every core, each
// goroutine a connection of its own, with the access log batched as the
// operator writes it and without. Run with -cpu 1,2: counters every core
// writes would make the second core add nothing.
func BenchmarkListingHandlerParallel(b *testing.B) {
	dir := b.TempDir()
	writeRelease(b, dir, "linux-amd64", release, []byte("amd64 binary"))
	for _, tt := range []struct {
		name string
		log  bool
	}{{"access-log", true}, {"no-access-log", false}} {
		b.Run(tt.name, func(b *testing.B) {
			var access *zerolog.Logger
			if tt.log {
				l := zerolog.New(logging.NewBufferedWriter(io.Discard, time.Hour)) // as cmd/operator: the server stamps lines
				access = &l
			}
			m := NewMetrics(prometheus.NewRegistry())
			h := New(Config{Store: newTestStore(b, dir), Metrics: m, Log: zerolog.Nop(), AccessLog: access}).Handler()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, UpdatePath, nil)
				req = req.WithContext(m.requests.connContext(req.Context(), nil))
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, req)
				}
			})
		})
	}
}
