package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/object-store-operator/operator/upgradeserver"
)

// TestClientsThatNeverReadCannotExhaustTheOperator: 2,500 clients, from 50
// loopback addresses (each within its per-client share of connections),
// ask for a 32 MiB binary and never read, and one pipelines listings it
// never reads. Later clients are served or told to retry (503 with
// Retry-After), and the operator's memory stays far below the chart's
// 512 MiB limit.
func TestClientsThatNeverReadCannotExhaustTheOperator(t *testing.T) {
	op, digest, c, url := servingRelease(t, randomBytes(t, 32<<20), 4)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(testCluster.KubeletServingCA))
	path := url[strings.Index(url, upgradeserver.UpdatePath):]
	dial := func(source string) (net.Conn, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
		return tls.DialWithDialer(d, "tcp", op.upgradeAddr, &tls.Config{RootCAs: pool, ServerName: podHost, NextProtos: []string{"http/1.1"}})
	}

	const stalled, sources = 2500, 50
	conns := make([]net.Conn, stalled)
	var g errgroup.Group
	g.SetLimit(64)
	for i := range conns {
		g.Go(func() error {
			conn, err := dial(fmt.Sprintf("127.0.3.%d", 1+i%sources))
			if err != nil {
				return err
			}
			conns[i] = conn
			_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, podHost)
			return err
		})
	}
	require.NoError(t, g.Wait())
	t.Cleanup(func() {
		for _, conn := range conns {
			conn.Close()
		}
	})
	pipelined, err := dial("127.0.4.1")
	require.NoError(t, err)
	defer pipelined.Close()
	for range 2000 {
		_, err := fmt.Fprintf(pipelined, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", upgradeserver.UpdatePath, podHost)
		if err != nil {
			break // the server stopped reading: its write is blocked, as it should be
		}
	}

	// A later client: served, or told when to come back.
	var served, retried int
	for range 20 {
		resp, err := c.Get(url)
		require.NoError(t, err)
		switch resp.StatusCode {
		case http.StatusOK:
			n, err := io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			assert.Equal(t, int64(32<<20), n)
			assert.Equal(t, digest, resp.Header.Get("X-Content-Sha256"))
			served++
		case http.StatusServiceUnavailable:
			assert.Equal(t, "5", resp.Header.Get("Retry-After"))
			retried++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	t.Logf("with %d stalled downloads: %d served, %d told to retry", stalled, served, retried)
	assert.Positive(t, retried, "the download limit answers 503 with Retry-After")
	assert.Len(t, listing(t, c, "https://"+podHost).Binaries, 1, "the listing is always served")

	peak := procStatusKiB(t, op.cmd.Process.Pid, "VmHWM")
	t.Logf("operator peak RSS: %d MiB", peak/1024)
	assert.Less(t, peak, 256<<10, "peak RSS (KiB) stays far below the chart's 512 MiB limit")
}
