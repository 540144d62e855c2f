package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/upgradeserver"
)

// BenchmarkImageChangeToListed: an ObjectStore's image changes to one with
// a 128 MiB binary on the local TLS registry, with three operator replicas
// (each fills its own store). Run with `make bench-pull`; it reports the
// time until the binary is listed on all three, and the replicas' largest
// peak RSS growth during the pull (streaming: well under the binary's size).
func BenchmarkImageChangeToListed(b *testing.B) {
	const size = 128 << 20
	for b.Loop() {
		e := newBinEnv(b)
		ops := []*operator{e.op}
		for i := range 2 {
			ops = append(ops, startOperator(b, append(e.env, fmt.Sprintf("OPERATOR_UPDATE_DIR=%s/replica-%d", b.TempDir(), i))))
		}
		small := e.reg.pushImage(b, "minio/aistor:RELEASE.2025-01-01T00-00-00Z", imageSpec{binary: randomBytes(b, 1<<20), releaseLbl: "RELEASE.2025-01-01T00-00-00Z"})
		e.objectStore(b, "tenant", small, "regcred")
		e.waitBinaryCondition(b, "tenant", metav1.ConditionTrue, "Available")
		next := e.reg.pushImage(b, "minio/aistor:"+release, imageSpec{binary: randomBytes(b, size), releaseLbl: release, extraLayers: 3})

		before := make([]int, len(ops))
		for i, op := range ops {
			before[i] = procStatusKiB(b, op.cmd.Process.Pid, "VmRSS")
			// Writing 5 resets the peak RSS (VmHWM) to the current RSS.
			require.NoError(b, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", op.cmd.Process.Pid), []byte("5"), 0o200))
		}
		start := time.Now()
		e.objectStore(b, "tenant", next, "regcred")
		require.Eventually(b, func() bool {
			for _, op := range ops {
				l := listing(b, op.client(b, testCluster.KubeletServingCA, 1), "https://"+serviceName+"."+e.opNS+".svc.cluster.local")
				if !slices.ContainsFunc(l.Binaries, func(bin upgradeserver.ListedBinary) bool { return bin.Release == release }) {
					return false
				}
			}
			return true
		}, 5*time.Minute, 50*time.Millisecond)
		took := time.Since(start)
		growth, peak := 0, 0
		for i, op := range ops {
			hwm := procStatusKiB(b, op.cmd.Process.Pid, "VmHWM")
			growth, peak = max(growth, hwm-before[i]), max(peak, hwm)
		}

		b.ReportMetric(took.Seconds(), "s-to-listed-on-3")
		b.ReportMetric(float64(3*size>>20)/took.Seconds(), "MiB/s")
		b.ReportMetric(float64(growth)/1024, "peak-rss-growth-MiB")
		b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
	}
}

func procStatusKiB(b testing.TB, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field+":") {
			v, err := strconv.Atoi(strings.Fields(l)[1])
			require.NoError(b, err)
			return v
		}
	}
	b.Fatalf("%s not in /proc/%d/status", field, pid)
	return 0
}
