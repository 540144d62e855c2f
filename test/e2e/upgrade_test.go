package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/upgradeserver"
)

const (
	opNamespace = "osop-system"
	release     = "RELEASE.2025-04-08T15-41-24Z"
)

var podHost = serviceName + "." + opNamespace + ".svc.cluster.local"

// testKey signs the releases the tests publish; every operator the tests
// start trusts it (OPERATOR_MINISIGN_PUBKEYS), as a MinIO pod would with
// MINIO_UPDATE_MINISIGN_PUBKEY.
var testKey = binstoretest.PackageKey()

// writeRelease lays out a signed release the way MinIO publishes it.
func writeRelease(t testing.TB, dir, platform string, content []byte) string {
	t.Helper()
	return binstoretest.WriteRelease(t, dir, platform, release, content, testKey)
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// fileModeOperator runs the operator serving a kubelet-serving-signed
// certificate from files, with a fresh update directory that seed fills
// first: the store reads its directory once, at start.
func fileModeOperator(t *testing.T, seed func(dir string), env ...string) (*operator, string) {
	t.Helper()
	certFile, keyFile := kubeletServingCertFiles(t, opNamespace)
	dir := t.TempDir()
	seed(dir)
	// The namespace names the Service the listing's URLs are built on, as
	// the chart sets it (outside a cluster nothing else would).
	op := startOperator(t, append([]string{"OPERATOR_UPDATE_DIR=" + dir, "OPERATOR_NAMESPACE=" + opNamespace}, env...), "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	return op, dir
}

// servingRelease runs a file-mode operator that serves content as the
// linux-amd64 release, waits until it is listed, and returns the operator,
// the binary's digest, a client for conns connections and the binary's URL.
func servingRelease(t *testing.T, content []byte, conns int, env ...string) (op *operator, digest string, c *http.Client, url string) {
	t.Helper()
	op, _ = fileModeOperator(t, func(dir string) { digest = writeRelease(t, dir, "linux-amd64", content) }, env...)
	c = op.client(t, testCluster.KubeletServingCA, conns)
	url = "https://" + podHost + upgradeserver.UpdatePath + "/linux-amd64/minio." + release
	require.Eventually(t, func() bool { return listedCount(c, "https://"+podHost) == 1 }, 10*time.Second, 50*time.Millisecond)
	return op, digest, c, url
}

// updateClientWalk does what MinIO's in-place update client does with the
// URL of a .sha256sum file: read its two fields, download the binary and
// its .minisig from the same directory, check the SHA-256 and verify the
// signature with the key the pod trusts (testKey unless given).
// It returns the verified binary.
func updateClientWalk(t testing.TB, c *http.Client, sumURL string, trusted ...binstoretest.Key) []byte {
	t.Helper()
	key := testKey
	if len(trusted) > 0 {
		key = trusted[0]
	}
	fields := strings.Fields(string(get(t, c, sumURL)))
	require.Len(t, fields, 2, "MinIO's client wants exactly two fields")
	require.True(t, strings.HasPrefix(fields[1], "minio."))
	dir := sumURL[:strings.LastIndex(sumURL, "/")]
	binary := get(t, c, dir+"/"+fields[1])
	sum := sha256.Sum256(binary)
	require.Equal(t, fields[0], hex.EncodeToString(sum[:]), "downloaded binary matches its .sha256sum")
	sig := get(t, c, dir+"/"+fields[1]+".minisig")
	require.True(t, minisign.Verify(key.Public, binary, sig), "the .minisig verifies with the trusted key, as MinIO's client checks")
	return binary
}

func listing(t testing.TB, c *http.Client, base string) upgradeserver.Listing {
	t.Helper()
	l, err := getListing(c, base)
	require.NoError(t, err)
	return l
}

// getListing is listing for a condition polled by Eventually, which runs
// it on a goroutine of its own where require may not stop the test.
func getListing(c *http.Client, base string) (upgradeserver.Listing, error) {
	var l upgradeserver.Listing
	resp, err := c.Get(base + upgradeserver.UpdatePath)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("GET %s: %s", base+upgradeserver.UpdatePath, resp.Status)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// listedCount is how many binaries base lists, -1 when it cannot tell.
func listedCount(c *http.Client, base string) int {
	l, err := getListing(c, base)
	if err != nil {
		return -1
	}
	return len(l.Binaries)
}

func TestCurlFromAPodGetsTheListOverVerifiedTLS(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	var digest string
	op, _ := fileModeOperator(t, func(dir string) { digest = writeRelease(t, dir, "linux-amd64", randomBytes(t, 1<<20)) })
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, testCluster.KubeletServingCA, 0o600))

	url := fmt.Sprintf("https://%s:%s%s", podHost, op.port(), upgradeserver.UpdatePath)
	var out []byte
	require.Eventually(t, func() bool {
		var err error
		out, err = exec.Command("curl", "-sS", "--fail", "--cacert", caFile,
			"--resolve", podHost+":"+op.port()+":127.0.0.1", url).CombinedOutput()
		return err == nil && strings.Contains(string(out), digest)
	}, 10*time.Second, 50*time.Millisecond, "curl output: %s", out)

	var l upgradeserver.Listing
	require.NoError(t, json.Unmarshal(out, &l))
	require.Len(t, l.Binaries, 1)
	assert.Equal(t, url+"/linux-amd64/minio."+release, l.Binaries[0].URL)
	require.Eventually(t, func() bool { return strings.Contains(op.logs.String(), `"message":"request"`) },
		2*time.Second, 10*time.Millisecond, "access log line (batched every 100 ms)")

	// The wrong CA is refused: curl verifies against the service name.
	other := filepath.Join(t.TempDir(), "other.crt")
	require.NoError(t, os.WriteFile(other, testCluster.ClusterCA, 0o600))
	_, err := exec.Command("curl", "-sS", "--fail", "--cacert", other,
		"--resolve", podHost+":"+op.port()+":127.0.0.1", url).CombinedOutput()
	assert.Error(t, err)

	// A Go client (MinIO's update client is one) that does not trust the
	// CA sees the symptom the AIStor troubleshooting steps describe, and the
	// operator logs the line they tell users to grep for.
	_, err = op.client(t, testCluster.ClusterCA, 1).Get(url)
	require.ErrorContains(t, err, "x509: certificate signed by unknown authority")
	require.Eventually(t, func() bool {
		return strings.Contains(op.logs.String(), "TLS handshake error from 127.0.0.1") &&
			strings.Contains(op.logs.String(), "remote error: tls: bad certificate")
	}, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, op.logs.String(), `"reason":"tls_handshake"`)
}

// TestMinIOUpdateClientWalk does what MinIO's in-place update client does
// with the URL of a .sha256sum file.
func TestMinIOUpdateClientWalk(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	content := randomBytes(t, 4<<20)
	op, _ := fileModeOperator(t, func(dir string) { writeRelease(t, dir, "linux-arm64", content) })
	c := op.client(t, testCluster.KubeletServingCA, 4)
	base := "https://" + podHost

	var updateURL string
	require.Eventually(t, func() bool {
		l, err := getListing(c, base)
		if err == nil && len(l.Binaries) == 1 {
			updateURL = l.Binaries[0].SHA256SumURL
		}
		return updateURL != ""
	}, 10*time.Second, 50*time.Millisecond)

	binary := updateClientWalk(t, c, updateURL)
	assert.Equal(t, content, binary)
	assert.NotEmpty(t, get(t, c, strings.TrimSuffix(updateURL, ".sha256sum")+".minisig"))
	assert.Equal(t, "minio."+release+".sha256sum", path.Base(updateURL))
}

func TestResumedDownloadReassemblesToTheRightChecksum(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	op, digest, c, url := servingRelease(t, randomBytes(t, 8<<20), 4)

	// The first attempt breaks off after 3 MiB.
	resp, err := c.Get(url)
	require.NoError(t, err)
	first := make([]byte, 3<<20)
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	resp.Body.Close()

	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", len(first)))
	req.Header.Set("If-Range", `"`+digest+`"`)
	resp, err = c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	sum := sha256.Sum256(append(first, rest...))
	assert.Equal(t, digest, hex.EncodeToString(sum[:]))

	// docs/upgrade-server.md's resume with curl -C -.
	partial := filepath.Join(t.TempDir(), "minio")
	require.NoError(t, os.WriteFile(partial, first, 0o600))
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, testCluster.KubeletServingCA, 0o600))
	out, err := exec.Command("curl", "-sS", "--fail", "-C", "-", "-o", partial, "--cacert", caFile,
		"--resolve", podHost+":"+op.port()+":127.0.0.1",
		fmt.Sprintf("https://%s:%s%s/linux-amd64/minio.%s", podHost, op.port(), upgradeserver.UpdatePath, release)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	resumed, err := os.ReadFile(partial)
	require.NoError(t, err)
	sum = sha256.Sum256(resumed)
	assert.Equal(t, digest, hex.EncodeToString(sum[:]), "curl -C - resumed to the right binary")
	require.Eventually(t, func() bool { return strings.Contains(op.logs.String(), `"status":206`) },
		2*time.Second, 10*time.Millisecond, "access log line of the ranged request")
}

func TestCorruptedBinaryDisappearsFromTheList(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	op, dir := fileModeOperator(t, func(dir string) {
		writeRelease(t, dir, "linux-amd64", randomBytes(t, 1<<20))
		writeRelease(t, dir, "linux-arm64", randomBytes(t, 1<<20))
	})
	c := op.client(t, testCluster.KubeletServingCA, 4)
	base := "https://" + podHost
	require.Eventually(t, func() bool { return listedCount(c, base) == 2 }, 10*time.Second, 50*time.Millisecond)

	corrupted := filepath.Join(dir, "linux-arm64", "minio."+release)
	require.NoError(t, os.WriteFile(corrupted, randomBytes(t, 1<<20), 0o644))
	// The store is not rescanned: a download notices the changed file and
	// verifies it again.
	resp, err := c.Get(base + upgradeserver.UpdatePath + "/linux-arm64/minio." + release)
	require.NoError(t, err)
	resp.Body.Close()

	require.Eventually(t, func() bool {
		l, err := getListing(c, base)
		return err == nil && len(l.Binaries) == 1 && l.Binaries[0].Arch == "amd64"
	}, 10*time.Second, 50*time.Millisecond, "corrupted binary still listed")
	resp, err = c.Get(base + upgradeserver.UpdatePath + "/linux-arm64/minio." + release)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, op.logs.String(), `"reason":"ChecksumMismatch"`)
	assert.Contains(t, op.logs.String(), `"file":"linux-arm64/minio.`+release+`"`)
}

func TestTraversalGetsNoFileContent(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	op, dir := fileModeOperator(t, func(dir string) { writeRelease(t, dir, "linux-amd64", []byte("inside the store")) })
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "secret"), []byte("TOP-SECRET"), 0o644))
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, testCluster.KubeletServingCA, 0o600))

	for _, p := range []string{
		"/../../../../etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd", "/%2e%2e/%2e%2e/secret",
		"/linux-amd64/..%5c..%5csecret", "/..\\..\\secret", "//etc/passwd", "/%2fetc%2fpasswd",
		"/minio." + release + "%00", "/../secret",
	} {
		url := fmt.Sprintf("https://%s:%s%s%s", podHost, op.port(), upgradeserver.UpdatePath, p)
		out, _ := exec.Command("curl", "-sS", "--path-as-is", "-w", "\n%{http_code}", "--cacert", caFile,
			"--resolve", podHost+":"+op.port()+":127.0.0.1", url).CombinedOutput()
		code := string(out[strings.LastIndex(string(out), "\n")+1:])
		assert.Contains(t, []string{"400", "404"}, code, "%s answered %s", p, out)
		assert.NotContains(t, string(out), "TOP-SECRET")
		assert.NotContains(t, string(out), "root:")
	}
}

func get(t testing.TB, c *http.Client, url string) []byte {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// TestConcurrentDownloadsAllVerify is the load test: 500 downloads of a
// 32 MiB binary at once, every body checked.
func TestConcurrentDownloadsAllVerify(t *testing.T) {
	// Serial: 16 GiB through TLS is CPU-bound, and its clients time out
	// when MinIO clusters compete for the two cores.
	const clients, size = 500, 32 << 20
	// MinIO downloads a binary once per tenant update (the node that is
	// called pushes it to its peers), so 500 at once is a load test: the
	// limit is raised to let them all through.
	// They all come from one address here, where 500 pods would each have
	// their own: the per-client shares are raised with it.
	// The readers here are this one process hashing 16 GiB: on a busy
	// machine each reads slower than the minimum rate a pod must keep up,
	// which is the test's pace, not a trickle, so the floor is lowered.
	_, digest, c, url := servingRelease(t, randomBytes(t, size), clients, fmt.Sprintf("OPERATOR_MAX_DOWNLOADS=%d", clients),
		fmt.Sprintf("OPERATOR_MAX_DOWNLOADS_PER_CLIENT=%d", clients), fmt.Sprintf("OPERATOR_MAX_CONNECTIONS_PER_CLIENT=%d", 2*clients),
		"OPERATOR_MIN_DOWNLOAD_RATE=1Ki")

	start := time.Now()
	// Every client has its response headers (its TLS handshake done)
	// before any reads a body. 500 clients hashing 16 GiB in this one
	// process on two cores would otherwise starve the goroutines still
	// handshaking past the server's 10 s handshake deadline, which 500
	// pods on their own nodes never do; the downloads still all run at
	// once.
	var wg, started sync.WaitGroup
	started.Add(clients)
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			resp, err := c.Get(url)
			started.Done()
			started.Wait()
			if err != nil {
				errs <- fmt.Errorf("download %d: %w", i, err)
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			switch {
			case err != nil:
				errs <- fmt.Errorf("download %d after %d bytes: %w", i, n, err)
			case resp.StatusCode != http.StatusOK:
				errs <- fmt.Errorf("download %d: %s", i, resp.Status)
			case hex.EncodeToString(h.Sum(nil)) != digest:
				errs <- fmt.Errorf("download %d: wrong sha256 after %d bytes", i, n)
			}
		})
	}
	wg.Wait()
	close(errs)
	var failures []string
	for err := range errs {
		failures = append(failures, err.Error())
	}
	assert.Empty(t, failures, "%d of %d downloads failed", len(failures), clients)
	elapsed := time.Since(start)
	t.Logf("%d x %d MiB downloads in %s (%.0f MiB/s)", clients, size>>20, elapsed.Round(time.Millisecond),
		float64(clients*(size>>20))/elapsed.Seconds())
}

// TestShutdownLetsRunningDownloadsFinish sends SIGTERM in the middle of a
// download: the download completes intact, new connections are refused,
// and the process exits.
func TestShutdownLetsRunningDownloadsFinish(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	content := randomBytes(t, 16<<20)
	op, digest, c, url := servingRelease(t, content, 2)

	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	h := sha256.New()
	_, err = io.CopyN(h, resp.Body, 1<<20)
	require.NoError(t, err)

	require.NoError(t, op.cmd.Process.Signal(syscall.SIGTERM))
	// What a client sees: new connections are refused once shutdown began.
	// Poll, and close any connection that got in before, or it would hold
	// shutdown up.
	require.Eventually(t, func() bool {
		conn, err := net.DialTimeout("tcp", op.upgradeAddr, time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "no new connections once shutdown began")

	_, err = io.Copy(h, resp.Body)
	require.NoError(t, err, "the running download completes")
	assert.Equal(t, digest, hex.EncodeToString(h.Sum(nil)))
	select {
	case <-op.done:
	case <-time.After(10 * time.Second):
		t.Fatal("operator did not exit after the download finished")
	}
	assert.Contains(t, op.logs.String(), fmt.Sprintf(`"status":200,"bytes":%d`, len(content)),
		"the batched access line of the download that finished during shutdown is written before exit")
}

func TestUpgradeServerMetrics(t *testing.T) {
	t.Parallel() // a file-mode operator: no Kubernetes, nothing shared
	op, _, c, url := servingRelease(t, randomBytes(t, 1<<20), 2)
	get(t, c, url)
	resp, err := c.Get("https://" + podHost + "/nope")
	require.NoError(t, err)
	resp.Body.Close()

	metrics := string(get(t, http.DefaultClient, "http://"+op.metricsAddr+"/metrics"))
	assert.Contains(t, metrics, `objectstore_operator_upgrade_requests_total{code="200",route="list"}`)
	assert.Contains(t, metrics, `objectstore_operator_upgrade_requests_total{code="200",route="file"} 1`)
	assert.Contains(t, metrics, `objectstore_operator_upgrade_requests_total{code="404",route="not_found"} 1`)
	assert.Contains(t, metrics, `objectstore_operator_upgrade_downloads_total{binary="linux-amd64/minio.`+release+`"} 1`)
	assert.Contains(t, metrics, "objectstore_operator_upgrade_downloads_in_flight 0")
	assert.Contains(t, metrics, "objectstore_operator_upgrade_binaries 1")
	assert.Contains(t, metrics, "objectstore_operator_store_size_bytes 1.048576e+06")
	assert.Regexp(t, `objectstore_operator_upgrade_sent_bytes_total \d+`, metrics)
	assert.Contains(t, metrics, `objectstore_operator_upgrade_request_duration_seconds_count{code="2xx",route="file"} 1`)
	assert.Contains(t, metrics, `objectstore_operator_upgrade_request_duration_seconds_count{code="4xx",route="not_found"} 1`)
	assert.Regexp(t, `objectstore_operator_upgrade_request_duration_seconds_bucket\{code="2xx",route="list",le="600"\} \d+`, metrics)
}
