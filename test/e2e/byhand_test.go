package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// TestUpdateByHandFromStatusBinaryURL: with the operator's updates paused,
// an administrator runs the real `mc admin update <alias>
// <status.binary.url>` (bin/mc, built by make tools from the pinned
// module graph) and the real MinIO updates in place to the tenant's own
// binary.
func TestUpdateByHandFromStatusBinaryURL(t *testing.T) {
	t.Parallel()
	e := newUpdateEnv(t, updateOpts{})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)
	// mc makes one call and nothing retries it: MinIO right after a start
	// damages its own push (see warm), as a run without this showed
	// ("Updated file has wrong checksum" on one node of four).
	e.minio.warm(t)
	kubectl(t, "annotate", "objectstore", e.store, "-n", e.tenantNS, apiv1.UpdatesPausedAnnotation+"=true")
	e.setImage(t, e.newImage)
	e.waitVersion(t, metav1.ConditionFalse, "UpdatesPaused", 60*time.Second)
	newerPath, err := cluster.MinIOBinary(e.newer)
	require.NoError(t, err)
	bin, err := os.ReadFile(newerPath)
	require.NoError(t, err)
	own := waitBinaryStatus(t, e.tenantNS, e.store, bin)

	mc := mcClient(t, e.certs)
	mc(t, "alias", "set", "tenant", fmt.Sprintf("https://127.0.0.1:%d", e.minioPorts[0]), e.minio.user, e.minio.pass)
	out := mc(t, "admin", "update", "tenant", own.URL, "--yes", "--json")
	assert.Contains(t, out, `"status":"success"`, out)
	assert.NotContains(t, out, `"err"`, "no node reports an error: %s", out)
	require.Eventually(t, func() bool { return e.minio.allRun(t, e.newer) }, time.Minute, 200*time.Millisecond,
		"every node runs %s: %v", e.newer, e.minio.versions(t))
}

// mcClient returns a runner of bin/mc with its own configuration
// directory, trusting the CAs of certs (a node's certs directory).
func mcClient(t testing.TB, certs map[string][]byte) func(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	dir := t.TempDir()
	for rel, pem := range certs {
		if strings.HasPrefix(rel, "CAs/") {
			path := filepath.Join(dir, "certs", rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			require.NoError(t, os.WriteFile(path, pem, 0o600))
		}
	}
	return func(t testing.TB, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "mc"), append([]string{"--config-dir", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "mc %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
}
