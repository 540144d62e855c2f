package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// minioReleases are the two releases `make tools` builds, older first.
func minioReleases(t testing.TB) (older, newer string) {
	t.Helper()
	older, newer, err := cluster.MinIOReleases()
	require.NoError(t, err)
	return older, newer
}

// minioCluster is a distributed MinIO of processes on one address
// (127.0.0.1 unless a layout says otherwise), one drive each, with TLS,
// as a tenant's pods would run it.
type minioCluster struct {
	host       string
	ports      []int
	nodes      []*minioNode
	user, pass string
	roots      *x509.CertPool
	// args and env start each node again (restart).
	args [][]string
	env  []string
	dirs []string
}

type minioNode struct {
	cmd  *exec.Cmd
	logs *testutil.LockedBuffer
	done chan struct{}
}

// startMinIO starts one process per entry of releases (the binary of that
// release, copied into the node's own directory: MinIO replaces its binary
// in place there). certs is the node's certs directory content (path ->
// PEM), written from the tenant's generated Secret.
func startMinIO(t testing.TB, ports []int, releases []string, certs map[string][]byte, roots *x509.CertPool, env ...string) *minioCluster {
	t.Helper()
	return startMinIOLayout(t, minioLayout{host: "127.0.0.1", pools: 1}, ports, releases, certs, roots, env...)
}

// minioLayout is where a minioCluster's nodes listen and how they form
// pools.
type minioLayout struct {
	// host is the address every node listens on, each on its own port.
	host string
	// pools splits the nodes, in order, into pools of equal size: MinIO
	// takes a pool as one argument of ellipses, so each pool's ports are
	// consecutive (consecutivePorts).
	pools int
}

// startMinIOLayout is startMinIO with the nodes where l says.
func startMinIOLayout(t testing.TB, l minioLayout, ports []int, releases []string, certs map[string][]byte, roots *x509.CertPool, env ...string) *minioCluster {
	t.Helper()
	m := &minioCluster{host: l.host, ports: ports, user: "tenant-admin", pass: "tenant-secret-123", roots: roots}
	base := t.TempDir()
	var endpoints []string
	switch {
	case len(ports) == 1:
		// One node: MinIO takes only a path (a URL is for distributed
		// setups).
		endpoints = []string{filepath.Join(base, "drive-0")}
	case l.pools > 1:
		// Ellipses expand to every port with the same path: each node
		// finds its drive in its own working directory (launch), which
		// /proc/self/cwd names for the process that opens it.
		size := len(ports) / l.pools
		require.Equal(t, len(ports), size*l.pools, "pools of equal size")
		for i := 0; i < len(ports); i += size {
			require.Equal(t, ports[i]+size-1, ports[i+size-1], "a pool's ports are consecutive")
			endpoints = append(endpoints, fmt.Sprintf("https://%s:{%d...%d}/proc/self/cwd/drive", l.host, ports[i], ports[i+size-1]))
		}
	default:
		for i, p := range ports {
			endpoints = append(endpoints, fmt.Sprintf("https://%s:%d%s", l.host, p, filepath.Join(base, fmt.Sprint("drive-", i))))
		}
	}
	m.env = append([]string{"MINIO_ROOT_USER=" + m.user, "MINIO_ROOT_PASSWORD=" + m.pass,
		"MINIO_UPDATE_MINISIGN_PUBKEY=" + testKey.PublicString(),
		"MINIO_CI_CD=on", "MINIO_BROWSER=off"}, env...)
	for i, release := range releases {
		dir := filepath.Join(base, fmt.Sprint("node-", i))
		m.dirs = append(m.dirs, dir)
		m.args = append(m.args, append([]string{"server", "--address", net.JoinHostPort(l.host, strconv.Itoa(ports[i])), "--certs-dir", filepath.Join(dir, "certs")}, endpoints...))
		m.nodes = append(m.nodes, nil)
		require.NoError(t, m.install(i, release, certs))
		require.NoError(t, m.launch(i))
	}
	t.Cleanup(func() {
		for _, n := range m.nodes {
			_ = n.cmd.Process.Signal(syscall.SIGTERM) // all at once, then wait for each
		}
		for i := range m.nodes {
			m.stop(t, i, t.Failed())
		}
	})
	require.Eventually(t, func() bool { return m.online(t) == len(ports) }, 90*time.Second, 250*time.Millisecond, "MinIO nodes online")
	return m
}

// install writes node i's certs directory and the binary of release, as
// a pod's container would start with them.
func (m *minioCluster) install(i int, release string, certs map[string][]byte) error {
	dir := m.dirs[i]
	if err := os.RemoveAll(filepath.Join(dir, "certs")); err != nil {
		return err
	}
	for rel, content := range certs {
		path := filepath.Join(dir, "certs", rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return err
		}
	}
	_, err := cluster.InstallMinIO(release, filepath.Join(dir, "bin"))
	return err
}

// launch starts node i's process from what install wrote.
func (m *minioCluster) launch(i int) error {
	dir := m.dirs[i]
	n := &minioNode{logs: &testutil.LockedBuffer{}, done: make(chan struct{})}
	if old := m.nodes[i]; old != nil {
		n.logs = old.logs // one log per node, across its restarts
	}
	env := append(os.Environ(), m.env...)
	// In a container (as CI is) MinIO waits for 127.0.0.1 to resolve to
	// something else; this names the node's own endpoint, as a pod's host
	// name would.
	env = append(env, "HOME="+dir, "_MINIO_SERVER_LOCAL="+m.addr(i))
	bin := filepath.Join(dir, "bin", "minio")
	// The binary was just written: a process that a parallel test forks
	// meanwhile holds its write descriptor until it execs, and exec fails
	// with "text file busy" (golang/go#22315). Try again, briefly.
	for attempt := 0; ; attempt++ {
		n.cmd = exec.Command(bin, m.args[i]...)
		n.cmd.Env, n.cmd.Stdout, n.cmd.Stderr, n.cmd.Dir = env, n.logs, n.logs, dir
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err := n.cmd.Start()
		if errors.Is(err, syscall.ETXTBSY) && attempt < 100 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("start MinIO node %d: %w", i, err)
		}
		break
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	m.nodes[i] = n
	return nil
}

// stop ends node i's process (SIGTERM, as a kubelet stopping the pod), and
// logs its tail when asked (t may then not be nil).
func (m *minioCluster) stop(t testing.TB, i int, log bool) {
	n := m.nodes[i]
	if n == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	if log {
		t.Logf("MinIO node %d log:\n%s", i, tailLines(n.logs.String(), 40))
	}
}

// online counts the nodes ServerInfo reports online.
func (m *minioCluster) online(t testing.TB) int {
	info, err := m.info(t)
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range info.Servers {
		if s.State == string(madmin.ItemOnline) {
			n++
		}
	}
	return n
}

// warm sends a few thousand S3 requests through every node. Right after a
// start, MinIO can fail a distributed update on some nodes ("Updated file
// has wrong checksum", "magic number mismatch"): the downloaded binary's
// buffer goes back to bytebufferpool while still in use, and until the
// pool has calibrated (42,000 uses) it keeps buffers of any size, so the
// next user overwrites the binary. Lookups of missing objects are the
// cheapest requests that use the pool; 3,000 per node were not always
// enough, 10,000 (about 16 s) were in every run. Tests that count update
// calls warm up first; the others do not need to (the operator converges).
func (m *minioCluster) warm(t testing.TB) {
	t.Helper()
	const bucket, perNode = "warm-up", 10000
	start := time.Now()
	defer func() {
		t.Logf("warm-up: %d requests in %s", perNode*len(m.ports), time.Since(start).Round(time.Millisecond))
	}()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range m.ports {
		client, err := minio.New(m.addr(i), &minio.Options{
			Creds: credentials.NewStaticV4(m.user, m.pass, ""), Secure: true,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.roots}, MaxIdleConnsPerHost: 32},
		})
		require.NoError(t, err)
		if i == 0 {
			// minio-go retries a request that failed in transit; a retry
			// of a creation that did land answers BucketAlreadyOwnedByYou.
			err := client.MakeBucket(t.Context(), bucket, minio.MakeBucketOptions{})
			if minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
				require.NoError(t, err)
			}
		}
		// Lookups of objects that do not exist: cheap requests that still
		// go through every node's path handling.
		for j := range perNode {
			g.Go(func() error {
				_, err := client.StatObject(t.Context(), bucket, fmt.Sprintf("node-%d/object-%d", i, j), minio.StatObjectOptions{})
				if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
					return nil
				}
				return err
			})
		}
	}
	require.NoError(t, g.Wait())
}

// addr is node i's address.
func (m *minioCluster) addr(i int) string {
	return net.JoinHostPort(m.host, strconv.Itoa(m.ports[i]))
}

func (m *minioCluster) admin(t testing.TB) *madmin.AdminClient {
	t.Helper()
	adm, err := madmin.NewWithOptions(m.addr(0), &madmin.Options{
		Creds: credentials.NewStaticV4(m.user, m.pass, ""), Secure: true,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.roots}},
	})
	require.NoError(t, err)
	return adm
}

func (m *minioCluster) info(t testing.TB) (madmin.InfoMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.admin(t).ServerInfo(ctx)
}

// versions maps each node's endpoint to the version it reports.
func (m *minioCluster) versions(t testing.TB) map[string]string {
	info, err := m.info(t)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, s := range info.Servers {
		out[s.Endpoint] = s.Version
	}
	return out
}

// allRun reports whether every node reports release (RELEASE.<t>).
func (m *minioCluster) allRun(t testing.TB, release string) bool {
	v := m.versions(t)
	if len(v) != len(m.ports) {
		return false
	}
	for _, version := range v {
		if releaseTag(version) != release {
			return false
		}
	}
	return true
}

// releaseTag turns MinIO's reported version (RFC 3339) into its release.
func releaseTag(version string) string {
	ts, err := time.Parse(time.RFC3339, version)
	if err != nil {
		return version
	}
	return "RELEASE." + ts.UTC().Format("2006-01-02T15-04-05Z")
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
