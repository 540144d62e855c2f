package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/binstore/binstoretest"
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
				l, err := getListing(op.client(b, testCluster.KubeletServingCA, 1), "https://"+serviceName+"."+e.opNS+".svc.cluster.local")
				if err != nil || !slices.ContainsFunc(l.Binaries, func(bin upgradeserver.ListedBinary) bool { return bin.Release == release }) {
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

// BenchmarkHundredTenantsTwentyBinaries: 100 tenants in 20 namespaces,
// 20 distinct signed binaries under 100 release labels (each binary under
// five), three replicas with their own stores. It reports the time from
// the ObjectStores' creation until every tenant's status.binary.url serves
// its own bytes on every replica, the largest replica's store size against
// the 20 distinct binaries (content addressing: identical bytes are kept
// once, whatever their labels), and the largest peak RSS.
func BenchmarkHundredTenantsTwentyBinaries(b *testing.B) {
	const (
		namespaces = 20
		perNS      = 5
		distinct   = 20
		size       = 4 << 20
	)
	for b.Loop() {
		e := newBinEnv(b)
		dirs := []string{e.updateDir}
		ops := []*operator{e.op}
		for i := range 2 {
			dir := fmt.Sprintf("%s/replica-%d", b.TempDir(), i)
			dirs = append(dirs, dir)
			ops = append(ops, startOperator(b, append(e.env, "OPERATOR_UPDATE_DIR="+dir)))
		}
		binaries := make([][]byte, distinct)
		for i := range binaries {
			binaries[i] = randomBytes(b, size)
		}
		type tenant struct {
			env         *binEnv
			name, image string
			want        []byte
		}
		var tenants []tenant
		for n := range namespaces {
			env := &binEnv{tenantNS: operatorNamespace(b), reg: e.reg, opNS: e.opNS}
			dockerConfigSecret(b, env.tenantNS, "regcred", e.reg.host, e.reg.user, e.reg.pass)
			for i := range perNS {
				k := n*perNS + i
				bin := binaries[k%distinct]
				label := fmt.Sprintf("RELEASE.2026-%02d-%02dT10-00-00Z", 1+k/28, 1+k%28)
				image := e.reg.pushImage(b, fmt.Sprintf("fleet/minio:%d", k), imageSpec{binary: bin, releaseLbl: label})
				tenants = append(tenants, tenant{env: env, name: fmt.Sprintf("tenant-%d", k), image: image, want: bin})
			}
		}
		for _, op := range ops {
			require.NoError(b, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", op.cmd.Process.Pid), []byte("5"), 0o200))
		}
		start := time.Now()
		for _, tn := range tenants {
			tn.env.objectStore(b, tn.name, tn.image, "regcred")
		}
		served := map[string]bool{}
		require.Eventually(b, func() bool {
			for _, tn := range tenants {
				if served[tn.env.tenantNS+"/"+tn.name] {
					continue
				}
				st := binaryStatus(b, tn.env.tenantNS, tn.name)
				if st == nil || st.SHA256 != binstoretest.SHA256(tn.want) || st.URL == "" {
					return false
				}
				for _, op := range ops {
					code, body := status(b, op.client(b, testCluster.KubeletServingCA, 1), st.URL)
					if code != http.StatusOK || !strings.HasPrefix(string(body), st.SHA256) {
						return false
					}
				}
				served[tn.env.tenantNS+"/"+tn.name] = true
			}
			return true
		}, 10*time.Minute, 200*time.Millisecond, "every tenant's URL serves its bytes on every replica")
		took := time.Since(start)
		var storeBytes int64
		for _, dir := range dirs {
			storeBytes = max(storeBytes, duBytes(b, dir))
		}
		peak := 0
		for _, op := range ops {
			peak = max(peak, procStatusKiB(b, op.cmd.Process.Pid, "VmHWM"))
		}
		b.ReportMetric(took.Seconds(), "s-to-served-on-3")
		b.ReportMetric(float64(storeBytes)/(1<<20), "store-MiB")
		b.ReportMetric(float64(storeBytes)/float64(distinct*size), "store/distinct")
		b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
	}
}

// duBytes is the disk usage of dir as du counts it (hard links once).
func duBytes(b testing.TB, dir string) int64 {
	out, err := exec.Command("du", "-sb", dir).Output()
	require.NoError(b, err)
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	require.NoError(b, err)
	return n
}
