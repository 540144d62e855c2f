package upgradeserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// These tests attack the real TLS server on loopback, each client from an
// address of its own (127.0.0.0/8 is all loopback on Linux): what one
// client does must not take the server from another.

// tlsServer serves dir's store (cfg.Store when set) over TLS with cfg
// (its Log, Certificates and Metrics filled in) and returns its address
// and the pool that trusts it.
func tlsServer(t testing.TB, dir string, cfg Config) (string, *x509.CertPool) {
	t.Helper()
	_, addr, pool := serveTLS(t, dir, cfg)
	return addr, pool
}

// serveTLS is tlsServer, with the Server for a look at its shares.
func serveTLS(t testing.TB, dir string, cfg Config) (*Server, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upgrade"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"object-store-operator.ops.svc.cluster.local"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cfg.Certificates = fixedCert{&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}
	if cfg.Store == nil {
		cfg.Store = newTestStore(t, dir)
	}
	cfg.Log = zerolog.Nop()
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	srv := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, ln.Addr().String(), pool
}

// downloadWhole GETs url with c and returns how many bytes of a 200 it read.
func downloadWhole(t *testing.T, c *http.Client, url string) int64 {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n, err := io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	return n
}

// from is an HTTPS client whose connections leave from source (a
// loopback address), one connection per request unless keepAlive.
func from(source string, pool *x509.CertPool, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:       d.DialContext,
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "object-store-operator.ops.svc.cluster.local"},
			DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1000,
		},
	}
}

// dialTLS opens one TLS connection from source, offering protos.
func dialTLS(t *testing.T, source, addr string, pool *x509.CertPool, protos ...string) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	return tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "object-store-operator.ops.svc.cluster.local", NextProtos: protos})
}

// startDownload sends a GET of path on a new connection from source and
// reads the status line and headers only: a client that then reads
// nothing, or trickles, holds the download.
func startDownload(t *testing.T, source, addr string, pool *x509.CertPool, path string) (int, *tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := dialTLS(t, source, addr, pool, "http/1.1")
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: object-store-operator.ops.svc.cluster.local\r\n\r\n", path)
	require.NoError(t, err)
	br := bufio.NewReaderSize(c, 1024)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	return resp.StatusCode, c, br
}

func TestTheListingDependsOnTheStoreAloneNotTheHost(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		writeRelease(t, dir, "linux-amd64", fmt.Sprintf("RELEASE.2025-04-%02dT15-41-24Z", i+1), []byte(fmt.Sprintf("binary %d", i)))
	}
	const base = "https://object-store-operator.ops.svc.cluster.local:4221" + UpdatePath
	addr, pool := tlsServer(t, dir, Config{BaseURL: base})

	get := func(host string) []byte {
		c, err := dialTLS(t, "127.0.0.2", addr, pool, "http/1.1")
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", UpdatePath, host)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return body
	}
	plain := get("object-store-operator.ops.svc.cluster.local:4221")
	// Go accepts a Host of up to MaxHeaderBytes; each entry once carried
	// it three times.
	long := get(strings.Repeat("h", 15<<10))
	assert.Equal(t, plain, long, "a long Host changes nothing in the listing")

	var l Listing
	require.NoError(t, json.Unmarshal(plain, &l))
	require.Len(t, l.Binaries, 20)
	for _, b := range l.Binaries {
		assert.True(t, strings.HasPrefix(b.URL, base+"/linux-amd64/minio.RELEASE."), "URLs come from the configured base: %s", b.URL)
	}
}

func TestHTTP2IsNotOfferedSoStreamsCannotMultiplyTheConnectionCap(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "", release, []byte("binary"))
	addr, pool := tlsServer(t, dir, Config{MaxConnections: 4})

	// A real HTTP/2 client that opens 100 streams on one connection and
	// advertises a zero flow-control window, so no answer can be sent and
	// each stream would hold a handler until the write timeout.
	_, err := dialTLS(t, "127.0.0.2", addr, pool, "h2")
	assert.ErrorContains(t, err, "no application protocol", "a client that speaks only h2 is refused at the handshake")
	c, err := dialTLS(t, "127.0.0.2", addr, pool, "h2", "http/1.1")
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "http/1.1", c.ConnectionState().NegotiatedProtocol, "h2 is not negotiated")
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c)
	require.NoError(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}))
	var block strings.Builder
	enc := hpack.NewEncoder(&block)
	for i := range 100 {
		block.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "object-store-operator"}, {":path", UpdatePath}} {
			require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: []byte(block.String()), EndStream: true, EndHeaders: true}); err != nil {
			break // the server closed the connection: nothing more to send
		}
	}
	// An HTTP/1.1 server reads the preface as a bad request and closes the
	// connection: no stream gets a handler.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	rest, err := io.ReadAll(c)
	assert.False(t, isTimeout(err), "the server closes the connection instead of holding it")
	assert.NotContains(t, string(rest), "200 OK", "no stream was answered")

	// curl and MinIO's update client, which speak HTTP/1.1, are served.
	resp, err := from("127.0.0.3", pool, false).Get("https://" + addr + UpdatePath)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "HTTP/1.1", resp.Proto)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// gauge reads a gauge without labels.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return gather(t, reg, name).GetMetric()[0].GetGauge().GetValue()
}

func TestOneClientCannotHoldEveryDownload(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it holds downloads, beside the others.
	t.Parallel()
	store, _ := bigStore(t)
	addr, pool := tlsServer(t, "", Config{Store: store, MaxDownloads: 4, MaxDownloadsPerClient: 2, StallTimeout: time.Minute})
	file := UpdatePath + "/minio." + release

	var held int
	for range 4 {
		code, _, _ := startDownload(t, "127.0.0.2", addr, pool, file)
		if code == http.StatusOK {
			held++
		} else {
			assert.Equal(t, http.StatusServiceUnavailable, code)
		}
	}
	assert.Equal(t, 2, held, "one address holds its share of the downloads, no more")

	// Another client downloads the whole binary meanwhile.
	assert.Equal(t, int64(bigSize), downloadWhole(t, from("127.0.0.3", pool, false), "https://"+addr+file))
}

func TestADownloadBelowTheMinimumRateLosesItsSlot(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it waits out a rate window, beside the others.
	t.Parallel()
	store, _ := bigStore(t)
	reg := prometheus.NewRegistry()
	// Windows of half a second: the first takes in what the socket
	// buffers hold, the second is the trickle alone.
	addr, pool := tlsServer(t, "", Config{Store: store, MaxDownloads: 1, StallTimeout: 500 * time.Millisecond, MinDownloadRate: 4 << 20, Metrics: NewMetrics(reg)})
	file := UpdatePath + "/minio." + release

	// A client that keeps reading, but 64 KiB every 50 ms (1.25 MiB/s at
	// most): it makes progress (a 256 KiB write goes through in 200 ms),
	// so no stall timeout ends it, and it would finish in under half a
	// minute.
	code, c, br := startDownload(t, "127.0.0.2", addr, pool, file)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	var got int64
	buf := make([]byte, 64<<10)
	var err error
	for err == nil {
		var n int
		n, err = io.ReadFull(br, buf)
		got += int64(n)
		// The client's pace, not a wait for the server; once the server
		// has let the slot go, what is left in the sockets' buffers is
		// read at once.
		if gauge(t, reg, "objectstore_operator_upgrade_downloads_in_flight") > 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	assert.False(t, isTimeout(err), "the server ended the download, not the client's deadline: %v", err)
	assert.Less(t, got, int64(bigSize), "the trickling download was cut short")

	// Its slot is free: a client at full speed gets the whole binary.
	require.Eventually(t, func() bool { return gauge(t, reg, "objectstore_operator_upgrade_downloads_in_flight") == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(bigSize), downloadWhole(t, from("127.0.0.3", pool, false), "https://"+addr+file), "a download above the rate is never cut")
}

func TestOneClientsIdleConnectionsCannotTakeEveryConnection(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "", release, []byte("binary"))
	addr, pool := tlsServer(t, dir, Config{MaxConnections: 16, MaxConnectionsPerClient: 4})

	// One client opens 16 keep-alive connections, asks for the listing on
	// each, and leaves them open and idle.
	var held int
	for range 16 {
		c, err := dialTLS(t, "127.0.0.2", addr, pool, "http/1.1")
		if err != nil {
			continue // closed on accept: the handshake never completes
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", UpdatePath); err != nil {
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusOK {
			held++
		}
	}
	assert.Equal(t, 4, held, "past its four, the client's connections are closed")

	// Another client still connects, on fresh connections.
	for range 8 {
		resp, err := from("127.0.0.3", pool, false).Get("https://" + addr + UpdatePath)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

// podsOf is a Clients whose pods and updates a test sets.
type podsOf struct {
	pods     map[netip.Addr]string
	updating map[string]string // namespace -> sha256
}

func (p podsOf) Namespace(a netip.Addr) string { return p.pods[a] }
func (p podsOf) Updating(ns, sha256 string) bool {
	sum, ok := p.updating[ns]
	return ok && (sha256 == "" || sum == sha256)
}
func addr(s string) netip.Addr                        { return netip.MustParseAddr(s) }
func (p podsOf) with(ns string, ips ...string) podsOf { return p.add(ns, ips) }
func (p podsOf) add(ns string, ips []string) podsOf {
	for _, ip := range ips {
		p.pods[addr(ip)] = ns
	}
	return p
}

func TestAPodsOfANamespaceShareOneShare(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it holds downloads, beside the others.
	t.Parallel()
	store, _ := bigStore(t)
	pods := podsOf{pods: map[netip.Addr]string{}}.with("tenant-a", "127.0.0.2", "127.0.0.3")
	addr, pool := tlsServer(t, "", Config{Store: store, MaxDownloads: 8, MaxDownloadsPerClient: 2, StallTimeout: time.Minute, Clients: pods})
	file := UpdatePath + "/minio." + release

	codes := []int{}
	for _, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.3"} {
		code, _, _ := startDownload(t, src, addr, pool, file)
		codes = append(codes, code)
	}
	assert.Equal(t, []int{200, 200, 503}, codes, "two pods of one namespace are one party")
	code, _, _ := startDownload(t, "127.0.0.4", addr, pool, file)
	assert.Equal(t, http.StatusOK, code, "an address of no known pod is a party of its own")
}

func TestAPodUpdatingToABinaryGetsItWhateverElseIsGoingOn(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it holds downloads, beside the others.
	t.Parallel()
	store, sum := bigStore(t)
	pods := podsOf{pods: map[netip.Addr]string{}, updating: map[string]string{"tenant-a": sum}}.with("tenant-a", "127.0.0.9")
	addr, pool := tlsServer(t, "", Config{Store: store, MaxDownloads: 4, MaxDownloadsPerClient: 1, MaxConnections: 8, MaxConnectionsPerClient: 4,
		StallTimeout: time.Minute, Clients: pods})
	file := UpdatePath + "/minio." + release

	// Strangers from four addresses take every download slot they may
	// have (three quarters) and every connection they may have.
	var held int
	for i := range 4 {
		if code, _, _ := startDownload(t, fmt.Sprintf("127.0.1.%d", i+1), addr, pool, file); code == http.StatusOK {
			held++
		}
	}
	assert.Equal(t, 3, held, "strangers hold three quarters of the downloads")
	for i := range 4 {
		if c, err := dialTLS(t, fmt.Sprintf("127.0.2.%d", i+1), addr, pool, "http/1.1"); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}

	// The updating tenant's pod connects, and downloads the whole binary.
	assert.Equal(t, int64(bigSize), downloadWhole(t, from("127.0.0.9", pool, false), "https://"+addr+file))
}

func TestMinIOsUpdateClientIsRefusedWithAClosedConnectionNotA503Body(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it holds downloads, beside the others.
	t.Parallel()
	store, _ := bigStore(t)
	addr, pool := tlsServer(t, "", Config{Store: store, MaxDownloads: 1, StallTimeout: time.Minute})
	file := UpdatePath + "/minio." + release
	code, _, _ := startDownload(t, "127.0.0.2", addr, pool, file)
	require.Equal(t, http.StatusOK, code)

	// MinIO's update client takes any body for the binary; it must see
	// a failed fetch instead, which the operator knows for its own.
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+file, nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", "MinIO (linux; amd64; kubernetes) minio/RELEASE.2026-01-10T10-00-00Z")
	_, err = from("127.0.0.3", pool, false).Do(req)
	require.Error(t, err, "no answer: the connection is closed")
	assert.Contains(t, err.Error(), "EOF")

	// curl gets the 503 with Retry-After.
	resp, err := from("127.0.0.3", pool, false).Get("https://" + addr + file)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "5", resp.Header.Get("Retry-After"))
}

func TestAnUpdatingPodConnectsWhateverHoldsTheConnections(t *testing.T) {
	dir := t.TempDir()
	sum := writeRelease(t, dir, "", release, make([]byte, 1<<20))
	pods := podsOf{pods: map[netip.Addr]string{}, updating: map[string]string{"good": sum}}.
		with("evil", "127.0.3.1").with("good", "127.0.0.9")
	addr, pool := tlsServer(t, dir, Config{MaxDownloads: 64, MaxDownloadsPerClient: 4, MaxConnections: 8, MaxConnectionsPerClient: 2,
		StallTimeout: time.Minute, Clients: pods})
	// Strangers hold their three quarters, another tenant's pods the
	// quarter kept for tenants.
	for _, src := range []string{"127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.3.1"} {
		for range 2 {
			if c, err := dialTLS(t, src, addr, pool, "http/1.1"); err == nil {
				t.Cleanup(func() { c.Close() })
			}
		}
	}
	assert.Equal(t, int64(1<<20), downloadWhole(t, from("127.0.0.9", pool, false), "https://"+addr+UpdatePath+"/minio."+release),
		"the updating tenant's MinIO connects past the total and downloads")
}

func TestNoShareLeaksWhateverWayARequestEnds(t *testing.T) {
	// Its own server and addresses (the shared store is only read):
	// it waits out a stall timeout, beside the others.
	t.Parallel()
	store, _ := bigStore(t)
	reg := prometheus.NewRegistry()
	srv, addr, pool := serveTLS(t, "", Config{Store: store, MaxDownloads: 2, MaxDownloadsPerClient: 1, MaxConnections: 32, MaxConnectionsPerClient: 8,
		StallTimeout: time.Second, MinDownloadRate: 64 << 20, Metrics: NewMetrics(reg)})
	file := UpdatePath + "/minio." + release
	url := "https://" + addr + file

	// 127.0.0.2 holds its one download; MinIO's client from there is
	// refused by a closed connection.
	code, c, _ := startDownload(t, "127.0.0.2", addr, pool, file)
	require.Equal(t, http.StatusOK, code)
	for range 5 {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("User-Agent", "MinIO (linux; amd64)")
		_, err = from("127.0.0.2", pool, false).Do(req)
		require.Error(t, err)
	}
	c.Close() // aborted mid-download
	// HEADs and multi-range downloads.
	for range 5 {
		req, err := http.NewRequest(http.MethodHead, url, nil)
		require.NoError(t, err)
		resp, err := from("127.0.0.3", pool, false).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		req, err = http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("Range", "bytes=0-10,100-200")
		resp, err = from("127.0.0.3", pool, false).Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A download cut for its rate.
	code, c, br := startDownload(t, "127.0.0.4", addr, pool, file)
	require.Equal(t, http.StatusOK, code)
	buf := make([]byte, 16<<10)
	for gauge(t, reg, "objectstore_operator_upgrade_downloads_in_flight") > 0 {
		if _, err := br.Read(buf); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // the client's pace
	}
	// The server let the download go: what is left in the sockets'
	// buffers is read at once.
	_, _ = io.Copy(io.Discard, br)
	c.Close()

	require.Eventually(t, func() bool {
		srv.conns.mu.Lock()
		defer srv.conns.mu.Unlock()
		return srv.conns.held == 0 && len(srv.conns.heldBy) == 0 && srv.conns.heldByStrangers == 0
	}, 15*time.Second, 10*time.Millisecond, "every connection's share is given back")
	for _, src := range []string{"127.0.0.2", "127.0.0.4"} {
		code, _, _ := startDownload(t, src, addr, pool, file)
		assert.Equal(t, http.StatusOK, code, "%s has its download share back", src)
	}
}

func TestATotalOfTwoOrMoreKeepsOneForTenants(t *testing.T) {
	for total, strangers := range map[int]int{0: 0, 1: 1, 2: 1, 3: 2, 4: 3, 8: 6, 4096: 3072} {
		assert.Equal(t, strangers, strangersShare(total), "of %d", total)
	}
}

func TestPlainHTTPSpeaksNoH2C(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "", release, []byte("binary"))
	srv := New(Config{Store: newTestStore(t, dir), Log: zerolog.Nop(), MaxConnections: 16})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	// Prior knowledge: the preface and a SETTINGS frame get no SETTINGS.
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, http2.NewFramer(c, c).WriteSettings())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	assert.False(t, n >= 9 && buf[3] == byte(http2.FrameSettings), "no HTTP/2 SETTINGS frame: %q", buf[:n])

	// Upgrade: h2c is not switched to.
	c2, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
	_, err = fmt.Fprintf(c2, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", UpdatePath)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "answered in HTTP/1.1")
}
