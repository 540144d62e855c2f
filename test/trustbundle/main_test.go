// Package trustbundle runs the operator against a control plane that
// serves ClusterTrustBundles (certificates.k8s.io/v1beta1 and the
// clusterTrustBundle projected volume, feature gates on, as Kubernetes
// 1.33 to 1.36 need). The end-to-end package test/e2e runs with them off,
// as clusters have them by default, and checks there that the operator
// attempts nothing; one control plane per package, so the two are apart.
package trustbundle

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

var (
	testCluster *cluster.Cluster
	operatorBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin, remove, err := cluster.BuildOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	operatorBin = bin
	return cluster.MainWith(m, &testCluster, cluster.Options{
		CRDs: []string{"../../helm/object-store-operator/crds"}, ClusterTrustBundles: true,
	})
}

// operator is the operator binary running as its own process.
type operator struct {
	cmd         *exec.Cmd
	metricsAddr string
	logs        *testutil.LockedBuffer
	done        chan struct{}
}

// startOperator runs the operator with env on free loopback ports and
// waits for /readyz; it is stopped at test end, its log printed if the
// test failed.
func startOperator(t *testing.T, env []string) *operator {
	t.Helper()
	ports, err := testutil.FreePorts(2)
	require.NoError(t, err)
	op := &operator{
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logs:        &testutil.LockedBuffer{}, done: make(chan struct{}),
	}
	op.cmd = exec.Command(operatorBin)
	op.cmd.Env = append(append(os.Environ(),
		fmt.Sprintf("OPERATOR_UPGRADE_ADDRESS=127.0.0.1:%d", ports[0]),
		"OPERATOR_METRICS_ADDRESS="+op.metricsAddr,
		"OPERATOR_LOG_LEVEL=debug",
		"OPERATOR_UPDATE_DIR="+t.TempDir(),
	), env...)
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
	require.Eventually(t, func() bool {
		select {
		case <-op.done:
			return true
		default:
		}
		resp, err := http.Get("http://" + op.metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "operator not ready")
	select {
	case <-op.done:
		t.Fatalf("operator exited during start-up:\n%s", op.logs.String())
	default:
	}
	return op
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

func adminClient(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := testCluster.Clientset()
	require.NoError(t, err)
	return cs
}

// namespace creates a namespace for one test, deleted at its end.
func namespace(t *testing.T) string {
	t.Helper()
	cs := adminClient(t)
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "osop-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "helm"), append(args, "--kubeconfig", testCluster.Kubeconfig)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), out)
	return string(out)
}
