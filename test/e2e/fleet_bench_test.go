package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// fleetOf is an operator with n single-node MinIO tenants on the older
// release, each alone in its namespace, every one Current.
func fleetOf(b *testing.B, n int, minioEnv ...string) (*updateEnv, []*fleetTenant) {
	e := newUpdateEnv(b, updateOpts{watchAll: true, releases: []string{""}, minioEnv: minioEnv})
	tenants := []*fleetTenant{{ns: e.tenantNS, store: e.store, minio: e.minio}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Four at a time: twenty MinIO processes starting at once on a small
	// machine miss their start deadline.
	slots := make(chan struct{}, 4)
	for _, port := range freePorts(b, n-1) {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			ft := e.addTenantOn(b, port, minioEnv...)
			mu.Lock()
			tenants = append(tenants, ft)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(tenants) != n {
		b.Fatalf("%d of %d tenants started", len(tenants), n)
	}
	require.Eventually(b, func() bool {
		for _, ft := range tenants {
			if ft.version(b).Reason != "Current" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 500*time.Millisecond, "every tenant Current")
	return e, tenants
}

// updating counts the tenants with an update recorded in flight
// (status.update), as the cap counts them, in one snapshot of the API (a
// list is served at one resourceVersion; reading them one by one could
// see an update that ended and the one that took its place).
func updating(b *testing.B, tenants []*fleetTenant) int {
	ours := map[string]bool{}
	for _, ft := range tenants {
		ours[ft.ns+"/"+ft.store] = true
	}
	list, err := dyn(b).Resource(apiv1.Resource).List(b.Context(), metav1.ListOptions{})
	require.NoError(b, err)
	n := 0
	for i := range list.Items {
		u := &list.Items[i]
		if s, err := apiv1.FromUnstructured(u); err == nil && ours[u.GetNamespace()+"/"+u.GetName()] && s.Status.Update != nil {
			n++
		}
	}
	return n
}

// procCPUSeconds is the process's user and system CPU time
// (/proc/<pid>/stat, in clock ticks of 1/100 s, Linux's USER_HZ).
func procCPUSeconds(b testing.TB, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The command name may hold spaces: fields are counted after its ")".
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, err := strconv.ParseFloat(fields[11], 64)
	require.NoError(b, err)
	stime, err := strconv.ParseFloat(fields[12], 64)
	require.NoError(b, err)
	return (utime + stime) / 100
}

// BenchmarkFleetOfTwentyUpdates is `make bench-fleet`: twenty real
// single-node MinIO tenants on the older release, every image changed at
// once. With the default cap (OPERATOR_MAX_CONCURRENT_UPDATES=4) no more
// than four updates are ever in flight (sampled from status.update every
// 200 ms); reported: seconds until every node runs the newer release and
// every condition says UpdatedInPlace, the most in flight seen, the
// operator's CPU seconds and peak RSS over the run.
func BenchmarkFleetOfTwentyUpdates(b *testing.B) {
	const n = 20
	for range b.N {
		b.StopTimer()
		e, tenants := fleetOf(b, n)
		pid := e.op.cmd.Process.Pid
		require.NoError(b, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200))
		cpu0 := procCPUSeconds(b, pid)
		b.StartTimer()
		start := time.Now()
		for _, ft := range tenants {
			ft.setImage(b, e.newImage)
		}
		most := 0
		for {
			most = max(most, updating(b, tenants))
			if most > 4 {
				b.Fatalf("%d updates in flight at once, more than the cap of 4", most)
			}
			done := 0
			for _, ft := range tenants {
				if ft.version(b).Reason == "UpdatedInPlace" && ft.minio.allRun(b, e.newer) {
					done++
				}
			}
			if done == n {
				break
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d of %d tenants updated after 10 minutes", done, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(took.Seconds(), "s-all-current")
		b.ReportMetric(float64(most), "most-in-flight")
		b.ReportMetric(procCPUSeconds(b, pid)-cpu0, "operator-cpu-s")
		b.ReportMetric(float64(procStatusKiB(b, pid, "VmHWM"))/1024, "operator-peak-rss-MiB")
		b.Logf("kubectl get ostore -A:\n%s", kubectl(b, "get", "ostore", "-A"))
	}
}

// BenchmarkFleetOfTwentyHalts is the second half of `make bench-fleet`:
// the same twenty tenants, every MinIO with MINIO_UPDATE=off, every image
// changed at once. The release reaches the failure budget's three
// namespaces first; they fail, the release halts, and seventeen tenants
// are never called (no UpdatingInPlace Event) and say UpdatesHalted.
// Reported: seconds until the seventeen say so, tenants called.
func BenchmarkFleetOfTwentyHalts(b *testing.B) {
	const n = 20
	for range b.N {
		b.StopTimer()
		e, tenants := fleetOf(b, n, "MINIO_UPDATE=off")
		b.StartTimer()
		start := time.Now()
		for _, ft := range tenants {
			ft.setImage(b, e.newImage)
		}
		var halted, rolled int
		require.Eventually(b, func() bool {
			halted, rolled = 0, 0
			for _, ft := range tenants {
				switch ft.version(b).Reason {
				case "UpdatesHalted":
					halted++
				case "RollingUpdate", "WaitingForNodes":
					rolled++
				}
			}
			return halted == n-3 && rolled == 3
		}, 5*time.Minute, 200*time.Millisecond, "three refused, seventeen halted")
		took := time.Since(start)
		b.StopTimer()
		called := 0
		for _, ft := range tenants {
			for _, r := range ft.eventReasons(b) {
				if r == "Normal UpdatingInPlace" {
					called++
					break
				}
			}
		}
		if called != 3 {
			b.Fatalf("%d tenants called, want the budget's 3", called)
		}
		b.ReportMetric(took.Seconds(), "s-to-halt")
		b.ReportMetric(float64(called), "tenants-called")
		b.ReportMetric(float64(n-called), "tenants-never-called")
	}
}
