package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/internal/testutil"
)

// operator is the operator binary running as its own process.
type operator struct {
	cmd         *exec.Cmd
	upgradeAddr string
	metricsAddr string
	logs        *testutil.LockedBuffer
	done        chan struct{}
	// clients are the HTTPS clients handed out, one per CA and size, so
	// a test that polls reuses its connections, as a pod's client does,
	// instead of leaving one idle connection a poll (the server holds a
	// client to its share of connections).
	clientsMu sync.Mutex
	clients   map[string]*http.Client
}

// startOperator runs the operator with env (KEY=VALUE) on free loopback
// ports and waits until /readyz answers 200. It is stopped at test end and
// its log is printed if the test failed.
func startOperator(t testing.TB, env []string, args ...string) *operator {
	t.Helper()
	op := launchOperator(t, env, args...)
	op.waitReady(t)
	return op
}

// launchOperator starts the operator without waiting for readiness.
func launchOperator(t testing.TB, env []string, args ...string) *operator {
	t.Helper()
	ports := freePorts(t, 2)
	op := &operator{
		upgradeAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logs:        &testutil.LockedBuffer{},
		done:        make(chan struct{}),
	}
	// A test that must know the upgrade port before the start (to put it
	// in OPERATOR_UPDATE_URL, say) sets the address itself.
	for _, e := range env {
		if addr, ok := strings.CutPrefix(e, "OPERATOR_UPGRADE_ADDRESS="); ok {
			op.upgradeAddr = addr
		}
		// The store outlives each process of a test (a restart finds it)
		// but not the test; registered first, it is removed after the
		// process stops.
		if dir, ok := strings.CutPrefix(e, "OPERATOR_UPDATE_DIR="); ok {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
		}
	}
	op.cmd = exec.Command(operatorBin, args...)
	op.cmd.Env = append(os.Environ(),
		"OPERATOR_UPGRADE_ADDRESS="+op.upgradeAddr,
		"OPERATOR_METRICS_ADDRESS="+op.metricsAddr,
		"OPERATOR_LOG_LEVEL=debug",
		"OPERATOR_MINISIGN_PUBKEYS="+testKey.PublicString(),
	)
	op.cmd.Env = append(op.cmd.Env, env...)
	op.cmd.Stdout, op.cmd.Stderr = op.logs, op.logs
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, op.cmd.Start())
	go func() { _ = op.cmd.Wait(); close(op.done) }()
	t.Cleanup(func() {
		op.stop()
		if t.Failed() {
			t.Logf("operator log:\n%s", op.logs.String())
		}
	})
	return op
}

func (op *operator) waitReady(t testing.TB) {
	t.Helper()
	// The condition runs off the test goroutine, where t.Fatal may not be
	// called: an exit ends the wait, and is reported here.
	require.Eventually(t, func() bool { return !op.alive() || op.ready() }, 20*time.Second, 20*time.Millisecond, "operator not ready")
	if !op.alive() {
		t.Fatalf("operator exited during start-up:\n%s", op.logs.String())
	}
}

// ready reports whether /readyz answers 200.
func (op *operator) ready() bool {
	ok, _ := op.readyz()
	return ok
}

// readyz reports whether /readyz answers 200, and what it says.
func (op *operator) readyz() (bool, string) {
	resp, err := http.Get("http://" + op.metricsAddr + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK, string(body)
}

// alive reports whether the process is still running.
func (op *operator) alive() bool {
	select {
	case <-op.done:
		return false
	default:
		return true
	}
}

func (op *operator) stop() {
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.done:
	case <-time.After(40 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.done
	}
}

// client returns an HTTPS client that trusts caPEM and dials the operator
// whatever host name the URL carries, as a pod resolving the Service would.
func (op *operator) client(t testing.TB, caPEM []byte, maxConns int) *http.Client {
	t.Helper()
	op.clientsMu.Lock()
	defer op.clientsMu.Unlock()
	key := fmt.Sprintf("%d %s", maxConns, caPEM)
	if c, ok := op.clients[key]; ok {
		return c
	}
	if op.clients == nil {
		op.clients = map[string]*http.Client{}
	}
	op.clients[key] = op.newClient(t, caPEM, maxConns)
	return op.clients[key]
}

func (op *operator) newClient(t testing.TB, caPEM []byte, maxConns int) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	dialer := &net.Dialer{}
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: maxConns,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, op.upgradeAddr)
			},
			ForceAttemptHTTP2: false,
		},
	}
}

func (op *operator) port() string {
	_, port, _ := strings.Cut(op.upgradeAddr, ":")
	return port
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := testutil.FreePorts(n)
	require.NoError(t, err)
	return ports
}

func execOutput(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// waitLog waits for a line containing substr. Only for the lines the
// docs tell users to grep for (docs/troubleshooting.md, docs/tls.md);
// everything else is asserted as users see it: conditions, Events,
// metrics, API writes.
func (op *operator) waitLog(t testing.TB, substr string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(op.logs.String(), substr) },
		5*time.Second, 10*time.Millisecond, "operator log never said %q", substr)
}

// waitDocumentedLine waits for the line whose message starts with msg,
// one the docs tell users to grep for, that contains every one of
// fields, and returns it.
func (op *operator) waitDocumentedLine(t testing.TB, msg string, fields ...string) string {
	t.Helper()
	var found string
	require.Eventually(t, func() bool {
		for _, l := range strings.Split(op.logs.String(), "\n") {
			if !strings.Contains(l, `"message":"`+msg) {
				continue
			}
			all := true
			for _, f := range fields {
				all = all && strings.Contains(l, f)
			}
			if all {
				found = l
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no %q line with %q", msg, fields)
	return found
}

func netListen(port int) (net.Listener, error) {
	return net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
}
