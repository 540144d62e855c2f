package e2e

import (
	"context"
	"fmt"
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
)

// BenchmarkMountSecretScale: 1,000 ObjectStores across 50 namespaces, each
// with its own server Secret and one CA Secret shared per namespace.
// Run with `make bench-scale`; it reports
//   - cold-s: operator start -> every generated Secret created,
//   - rotate-s: all 50 CA Secrets rotated -> every generated Secret current (goal <= 30 s),
//   - resync-writes: API writes during full resyncs with nothing changed (goal 0),
//   - rss-MiB: the operator's resident memory afterwards.
func BenchmarkMountSecretScale(b *testing.B) {
	const namespaces, perNamespace = 50, 20
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
			c, _, _ := selfSigned(b, nil, []string{"shared-ca"}, now.Add(-time.Hour), now.Add(time.Hour))
			return c
		}
		parallel(b, nss, func(ns string) error {
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared-ca"}, Data: map[string][]byte{"ca.crt": caPEM()}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for i := range perNamespace {
				name := fmt.Sprintf("store-%02d", i)
				certPEM, keyPEM, _ := selfSigned(b, nil, []string{name + "." + ns + ".svc"}, now.Add(-time.Hour), now.Add(time.Hour))
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
		op := startOperator(b, k8sEnv(opNS, "OPERATOR_RESYNC_PERIOD=5s", "OPERATOR_LOG_LEVEL=warn"))
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
		time.Sleep(11 * time.Second)
		resyncWrites := totalWrites(b, op) - before

		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(rotate.Seconds(), "rotate-s")
		b.ReportMetric(resyncWrites, "resync-writes")
		b.ReportMetric(float64(procStatusKiB(b, op.cmd.Process.Pid, "VmRSS"))/1024, "rss-MiB")
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
	}, 5*time.Minute, 250*time.Millisecond)
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
