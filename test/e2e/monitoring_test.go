package e2e

import (
	"crypto/sha256"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAccessLogCanBeTurnedOffAlone: with OPERATOR_ACCESS_LOG=off the
// upgrade server writes no access line (the line docs/upgrade-server.md
// describes, message "request"), even those flushed at shutdown, while its
// request metrics still count every request.
func TestAccessLogCanBeTurnedOffAlone(t *testing.T) {
	op, _, c, url := servingRelease(t, randomBytes(t, 1<<20), 2, "OPERATOR_ACCESS_LOG=off")
	get(t, c, url)
	metrics := string(get(t, http.DefaultClient, "http://"+op.metricsAddr+"/metrics"))
	assert.Contains(t, metrics, `objectstore_operator_upgrade_requests_total{code="200",route="file"} 1`, "requests are still counted")

	// Access lines are batched and flushed at exit: stop, then read all.
	op.stop()
	assert.NotContains(t, op.logs.String(), `"message":"request"`)
	assert.Contains(t, op.logs.String(), `"message":"operator stopped"`, "the rest of the log is written")
}

// TestShutdownGraceZeroClosesDownloadsAtOnce: OPERATOR_SHUTDOWN_GRACE=0s
// means no grace, as docs/configuration.md says (it once became 30 s): a
// download whose client stopped reading does not hold the exit up.
func TestShutdownGraceZeroClosesDownloadsAtOnce(t *testing.T) {
	content := randomBytes(t, 32<<20)
	op, _, c, url := servingRelease(t, content, 2, "OPERATOR_SHUTDOWN_GRACE=0s")
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	h := sha256.New()
	_, err = io.CopyN(h, resp.Body, 1<<20)
	require.NoError(t, err)

	signalled := time.Now()
	require.NoError(t, op.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-op.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the operator waits for a download although OPERATOR_SHUTDOWN_GRACE=0s")
	}
	t.Logf("exited %s after SIGTERM with a download running", time.Since(signalled).Round(time.Millisecond))
	n, err := io.Copy(h, resp.Body)
	assert.True(t, err != nil || n+1<<20 < int64(len(content)), "the running download was cut, not finished (%d more bytes, %v)", n, err)
}
