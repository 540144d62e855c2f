package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
)

// BenchmarkMountSecretScale: 10,000 ObjectStores across 1,000 namespaces,
// each with its own server Secret and one CA Secret shared per namespace,
// plus 3,000 unrelated 200 KiB Secrets (three per namespace, as Helm
// release Secrets would be). Run with `make bench-scale`
// (BENCH_NAMESPACES and BENCH_STORES_PER_NAMESPACE shrink it); it reports
//   - cold-s: operator start -> every generated Secret created,
//   - rotate-s: every CA Secret rotated -> every generated Secret current (goal <= 60 s),
//   - resync-writes: API writes during two full resyncs with nothing changed (goal 0),
//   - peak-rss-MiB: the leader's peak resident memory (goal <= 256 MiB),
//     run as in a container limited to 256 MiB: the operator then sets
//     the Go runtime's soft limit to 90% of it (GOMEMLIMIT here, as
//     cmd/operator/memlimit.go would derive it); BENCH_GOMEMLIMIT=off
//     runs without,
//   - heap-MiB: the Go heap in use at the end (what is live, plus garbage
//     not yet collected).
func BenchmarkMountSecretScale(b *testing.B) {
	namespaces, perNamespace := envInt(b, "BENCH_NAMESPACES", 1000), envInt(b, "BENCH_STORES_PER_NAMESPACE", 10)
	const unrelatedPerNamespace, unrelatedSize, resync = 3, 200 << 10, 15 * time.Second
	unrelated := make([]byte, unrelatedSize)
	for b.Loop() {
		ctx := b.Context()
		cs := adminClient(b)
		d := dyn(b)
		var nss []string
		for range namespaces {
			nss = append(nss, operatorNamespace(b))
		}
		now := time.Now()
		caPEM := func() []byte {
			c, _, _ := testutil.KeyPair(b, nil, []string{"shared-ca"}, now.Add(-time.Hour), now.Add(time.Hour))
			return c
		}
		parallel(b, nss, func(ns string) error {
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared-ca"}, Data: map[string][]byte{"ca.crt": caPEM()}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for i := range unrelatedPerNamespace {
				if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.app.v%d", i+1)},
					Type: "helm.sh/release.v1", Data: map[string][]byte{"release": unrelated}}, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			for i := range perNamespace {
				name := fmt.Sprintf("store-%02d", i)
				certPEM, keyPEM, _ := testutil.KeyPair(b, nil, []string{name + "." + ns + ".svc"}, now.Add(-time.Hour), now.Add(time.Hour))
				if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls"},
					Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}, metav1.CreateOptions{}); err != nil {
					return err
				}
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
					"metadata": map[string]any{"name": name, "namespace": ns},
					"spec": map[string]any{"certificates": map[string]any{
						"server":     []any{map[string]any{"name": name + "-tls"}},
						"trustedCAs": []any{map[string]any{"name": "shared-ca"}},
					}},
				}}
				if _, err := d.Resource(apiv1.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		})

		opNS := operatorNamespace(b)
		start := time.Now()
		env := k8sEnv(opNS, "OPERATOR_RESYNC_PERIOD="+resync.String(), "OPERATOR_LOG_LEVEL=warn")
		if os.Getenv("BENCH_GOMEMLIMIT") != "off" {
			env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", 256<<20*9/10))
		}
		op := startOperator(b, env)
		waitAll(b, nss, perNamespace, func(s *corev1.Secret) bool { return true })
		cold := time.Since(start)

		rotated := map[string][]byte{}
		var mu sync.Mutex
		start = time.Now()
		parallel(b, nss, func(ns string) error {
			ca := caPEM()
			mu.Lock()
			rotated[ns] = ca
			mu.Unlock()
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "shared-ca", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Data = map[string][]byte{"ca.crt": ca}
			_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
		waitAll(b, nss, perNamespace, func(s *corev1.Secret) bool {
			return string(s.Data["CAs.trusted.shared-ca.crt"]) == string(rotated[s.Namespace])
		})
		rotate := time.Since(start)

		// Let the last status updates land, then count over two resyncs.
		time.Sleep(2 * time.Second)
		before := totalWrites(b, op)
		time.Sleep(2*resync + 5*time.Second)
		resyncWrites := totalWrites(b, op) - before

		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(rotate.Seconds(), "rotate-s")
		b.ReportMetric(resyncWrites, "resync-writes")
		b.ReportMetric(float64(procStatusKiB(b, op.cmd.Process.Pid, "VmHWM"))/1024, "peak-rss-MiB")
		b.ReportMetric(metricValue(b, op, "go_memstats_heap_inuse_bytes")/(1<<20), "heap-MiB")
	}
}

func parallel(b testing.TB, nss []string, fn func(ns string) error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(nss))
	for _, ns := range nss {
		wg.Go(func() {
			if err := fn(ns); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}

// waitAll polls until every namespace has perNamespace generated Secrets
// that satisfy ok.
func waitAll(b testing.TB, nss []string, perNamespace int, ok func(*corev1.Secret) bool) {
	cs := adminClient(b)
	want := map[string]bool{}
	for _, ns := range nss {
		want[ns] = true
	}
	require.Eventually(b, func() bool {
		list, err := cs.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{LabelSelector: apiv1.ObjectStoreLabel})
		if err != nil {
			return false
		}
		good := map[string]int{}
		for i := range list.Items {
			if s := &list.Items[i]; want[s.Namespace] && ok(s) {
				good[s.Namespace]++
			}
		}
		for ns := range want {
			if good[ns] != perNamespace {
				return false
			}
		}
		return true
	}, 10*time.Minute, time.Second)
}

// metricValue reads one unlabelled metric from the operator's /metrics.
func metricValue(b testing.TB, op *operator, name string) float64 {
	for _, l := range strings.Split(string(get(b, http.DefaultClient, "http://"+op.metricsAddr+"/metrics")), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			require.NoError(b, err)
			return v
		}
	}
	b.Fatalf("%s not in the operator's metrics", name)
	return 0
}

func envInt(b testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	return n
}

func totalWrites(b testing.TB, op *operator) float64 {
	var sum float64
	for _, l := range strings.Split(writeCount(b, op), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			v, err := strconv.ParseFloat(f[1], 64)
			require.NoError(b, err)
			sum += v
		}
	}
	return sum
}
