package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/test/cluster"
)

// TestMakeRunComesUpAndGoesDownCleanlyTwice runs hack/run (what `make run`
// runs): the printed curl lists a real binary, the printed kubectl command
// updates the demo MinIO in place (the first time), Ctrl-C stops everything
// it started, and a second run works too.
func TestMakeRunComesUpAndGoesDownCleanlyTwice(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	runBin := filepath.Join(t.TempDir(), "run")
	build := exec.Command("go", "build", "-o", runBin, "./hack/run")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	local := t.TempDir()

	for attempt := 1; attempt <= 2; attempt++ {
		ports := freePorts(t, 2)
		cmd := exec.Command(runBin)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "OSOP_LOCAL_DIR="+local, "OSOP_OPERATOR="+operatorBin,
			fmt.Sprintf("OPERATOR_UPGRADE_ADDRESS=127.0.0.1:%d", ports[0]),
			fmt.Sprintf("OPERATOR_METRICS_ADDRESS=127.0.0.1:%d", ports[1]))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = cmd.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		require.NoError(t, cmd.Start())

		curlLine, updateLine := make(chan string, 1), make(chan string, 1)
		var output strings.Builder
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				output.WriteString(line + "\n")
				l := strings.TrimSpace(line)
				if strings.HasPrefix(l, "curl --cacert") {
					curlLine <- l
				}
				if after, ok := strings.CutPrefix(l, "update in place:"); ok {
					updateLine <- strings.TrimSpace(after)
				}
			}
		}()
		var curl string
		select {
		case curl = <-curlLine:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("run %d printed no curl", attempt)
		}
		args := strings.Fields(curl)
		var body []byte
		// The seeded binary is indexed once its files have settled.
		require.Eventually(t, func() bool {
			body, err = exec.Command(args[0], append([]string{"-sS", "--fail"}, args[1:]...)...).CombinedOutput()
			return err == nil && strings.Contains(string(body), `"minio.RELEASE.`)
		}, 30*time.Second, 100*time.Millisecond, "run %d: the printed curl fails or lists no binary: %s", attempt, body)

		var update string
		select {
		case update = <-updateLine:
		case <-time.After(60 * time.Second):
			t.Fatalf("run %d printed no update command:\n%s", attempt, output.String())
		}
		if attempt == 1 {
			f := strings.Fields(update) // kubectl --kubeconfig <file> patch ...
			kubectlGet := func() string {
				out, _ := exec.Command(f[0], f[1], f[2], "get", "objectstore", "-n", "tenant-demo").CombinedOutput()
				return string(out)
			}
			require.Eventually(t, func() bool { return strings.Contains(kubectlGet(), "Current") }, 60*time.Second, 200*time.Millisecond,
				"the demo tenant is current on the older release")
			out, err := exec.Command("sh", "-c", update).CombinedOutput()
			require.NoError(t, err, "the printed update command: %s", out)
			require.Eventually(t, func() bool { return strings.Contains(kubectlGet(), "UpdatedInPlace") }, 2*time.Minute, 200*time.Millisecond,
				"kubectl get objectstore shows the in-place update")
			assert.Contains(t, kubectlGet(), "RELEASE.", "and the release")
		}

		require.NoError(t, cmd.Process.Signal(syscall.SIGINT), "Ctrl-C")
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "run %d exits cleanly on Ctrl-C", attempt)
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("run %d did not stop on Ctrl-C", attempt)
		}
		// Everything it started is gone: its etcd's data dir is no longer locked
		// by a process, and the upgrade port is free again.
		pids, _ := exec.Command("pgrep", "-f", filepath.Join(local, "cluster")).Output()
		assert.Empty(t, strings.TrimSpace(string(pids)), "run %d left processes behind", attempt)
		l, err := netListen(ports[0])
		require.NoError(t, err, "run %d still holds the upgrade port", attempt)
		l.Close()
	}
}
