package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// BenchmarkSteadyStateAPIRate: 1,000 ObjectStores (100 namespaces of 10;
// BENCH_RATE_NAMESPACES and BENCH_RATE_STORES_PER_NAMESPACE change it),
// each with its configuration Secret, its pull Secret, its server
// certificate Secret (and one CA Secret per namespace), a StatefulSet on
// spec.image and spec.updates.endpoint at one fake MinIO admin API that
// reports the image's release: every tenant is Current. The operator runs
// in its default mode (autocert). Once every
// ObjectStore shows BinaryAvailable, CertificatesReady and VersionCurrent
// True and a resync has passed, it counts the operator's requests to the
// apiserver for BENCH_RATE_WINDOW (60 s) in the audit log (the operator
// runs as the audited ServiceAccount), with OPERATOR_RESYNC_PERIOD=30s so
// the window holds two resyncs of everything (BENCH_RATE_RESYNC changes
// it: 10m, the default, measures the time between resyncs). It reports
//   - api-req/s: the operator's requests per second (goal < 1 for the fleet),
//   - admin-req/s: requests to the tenants' admin API (not the apiserver's),
//   - cpu-%: the operator's CPU over the window (100 = one core),
//   - rss-MiB: its resident memory at the end,
//   - settle-s: operator start -> every condition True.
//
// The requests of the window are logged by verb and resource.
func BenchmarkSteadyStateAPIRate(b *testing.B) {
	namespaces, perNamespace := envInt(b, "BENCH_RATE_NAMESPACES", 100), envInt(b, "BENCH_RATE_STORES_PER_NAMESPACE", 10)
	window := 60 * time.Second
	if v := os.Getenv("BENCH_RATE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err)
		window = d
	}
	resync := 30 * time.Second
	if v := os.Getenv("BENCH_RATE_RESYNC"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err)
		resync = d
	}
	for b.Loop() {
		f := startFleet(b, namespaces, perNamespace, resync)

		// The first resync after the fleet settled (at most a minute: a
		// long BENCH_RATE_RESYNC measures the time between resyncs),
		// then the window.
		time.Sleep(min(resync, time.Minute) + 5*time.Second)
		adminBefore := f.adminRequests.Load()
		cpuBefore := procCPUSeconds(b, f.op.cmd.Process.Pid)
		from := time.Now()
		time.Sleep(window)
		to := time.Now()
		cpu := procCPUSeconds(b, f.op.cmd.Process.Pid) - cpuBefore
		adminCalls := float64(f.adminRequests.Load() - adminBefore)
		requests := f.distinctRequests(b, from, to)
		b.Logf("%d ObjectStores settled in %s; in %s of steady state the operator made %d requests (%s), %d about other namespaces",
			namespaces*perNamespace, f.settle.Round(time.Second), window, requests.total, requests, requests.others)

		b.ReportMetric(float64(requests.total)/to.Sub(from).Seconds(), "api-req/s")
		b.ReportMetric(adminCalls/to.Sub(from).Seconds(), "admin-req/s")
		b.ReportMetric(100*cpu/to.Sub(from).Seconds(), "cpu-%")
		b.ReportMetric(float64(procStatusKiB(b, f.op.cmd.Process.Pid, "VmRSS"))/1024, "rss-MiB")
		b.ReportMetric(f.settle.Seconds(), "settle-s")
	}
}

// TestIdleFleetReadsNothingButLeases: ten Current ObjectStores (each with
// its configuration, pull and certificate Secrets, a StatefulSet and the
// fake admin API) resynced every 3 s: once settled, the operator's only
// requests over three resyncs of everything (every controller syncs every
// ObjectStore; the updater asks each tenant's admin API, which counts
// them) are its leader election's Lease: the namespace claims are read
// through an informer's watch, renewed by no one. A pull
// Secret read on every sync was two GETs per ObjectStore per resync.
func TestIdleFleetReadsNothingButLeases(t *testing.T) {
	const stores = 10
	f := startFleet(t, 2, stores/2, 3*time.Second)
	resyncs := func(n int) {
		t.Helper()
		base := f.adminRequests.Load()
		require.Eventually(t, func() bool { return f.adminRequests.Load() >= base+int64(n*stores) }, time.Duration(n)*10*time.Second,
			50*time.Millisecond, "%d resync(s): every tenant's admin API asked", n)
	}
	resyncs(1) // past the settling
	from := time.Now()
	resyncs(3)
	to := time.Now()
	requests := f.distinctRequests(t, from, to)
	t.Logf("in %s (three resyncs): %s; %d about earlier tests' leftovers", to.Sub(from).Round(time.Millisecond), requests, requests.others)
	for kind, n := range requests.byKind {
		if !strings.HasSuffix(kind, " leases") {
			t.Errorf("%d requests %q at steady state", n, kind)
		}
	}
	// Leader election renews every 2 s.
	assert.LessOrEqual(t, float64(requests.total), 3+to.Sub(from).Seconds()/2)
	assert.True(t, f.op.alive())
}

// fleet is an audited operator over namespaces x perNamespace Current
// ObjectStores (see BenchmarkSteadyStateAPIRate), settled.
type fleet struct {
	namespaces    map[string]bool
	op            *operator
	adminRequests *atomic.Int64
	settle        time.Duration
}

func startFleet(b testing.TB, namespaces, perNamespace int, resync time.Duration) *fleet {
	b.Helper()
	ctx := b.Context()
	ensureCRD(b)
	cs, d := adminClient(b), dyn(b)
	env := auditedOperatorEnv(b)
	opNS := cluster.AuditedNamespace

	reg := startRegistry(b)
	trustCA(b, opNS, "aistor-ca-tls-registry", reg.caPEM)
	older, _ := minioReleases(b)
	image := reg.pushImage(b, "minio/aistor:"+older, imageSpec{binary: randomBytes(b, 64<<10), releaseLbl: older})
	admin, adminRequests := currentAdmin(b, older, 4)
	now := time.Now()

	var nss []string
	for range namespaces {
		nss = append(nss, operatorNamespace(b))
	}
	auth := base64.StdEncoding.EncodeToString([]byte(reg.user + ":" + reg.pass))
	pull, err := json.Marshal(map[string]any{"auths": map[string]any{reg.host: map[string]string{"auth": auth}}})
	require.NoError(b, err)
	parallel(b, nss, func(ns string) error {
		caPEM, _, _ := testutil.KeyPair(b, nil, []string{"shared-ca"}, now.Add(-time.Hour), now.Add(24*time.Hour))
		secrets := []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "shared-ca"}, Data: map[string][]byte{"ca.crt": caPEM}}}
		for i := range perNamespace {
			name := fmt.Sprintf("store-%02d", i)
			certPEM, keyPEM, _ := testutil.KeyPair(b, nil, []string{name + "." + ns + ".svc"}, now.Add(-time.Hour), now.Add(24*time.Hour))
			secrets = append(secrets,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls"}, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-env"}, Data: map[string][]byte{apiv1.ConfigEnvKey: []byte(
					"export MINIO_ROOT_USER=admin\nexport MINIO_ROOT_PASSWORD=secret12345\n")}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-pull"}, Type: corev1.SecretTypeDockerConfigJson,
					Data: map[string][]byte{corev1.DockerConfigJsonKey: pull}})
		}
		for _, s := range secrets {
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		for i := range perNamespace {
			name := fmt.Sprintf("store-%02d", i)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
				"metadata": map[string]any{"name": name, "namespace": ns},
				"spec": map[string]any{
					"image":            image,
					"imagePullSecrets": []any{map[string]any{"name": name + "-pull"}},
					"configuration":    map[string]any{"name": name + "-env"},
					"certificates": map[string]any{
						"server":     []any{map[string]any{"name": name + "-tls"}},
						"trustedCAs": []any{map[string]any{"name": "shared-ca"}},
					},
					"updates": map[string]any{"endpoint": admin.URL},
				},
			}}
			if _, err := d.Resource(apiv1.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				return err
			}
			// No replicas: the pods would only load the control plane.
			zero := int32(0)
			labels := map[string]string{"app": apiv1.ObjectStoreLabelValue(name)}
			if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: poolName(name),
					Labels:      map[string]string{apiv1.ObjectStoreLabel: apiv1.ObjectStoreLabelValue(name)},
					Annotations: map[string]string{apiv1.ObjectStoreNameAnnotation: name}},
				Spec: appsv1.StatefulSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "minio", Image: image}}}}},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})

	// The default mode, autocert: its issuer and the trust pool are
	// measured too.
	env = append(env, "OPERATOR_RESYNC_PERIOD="+resync.String(), "OPERATOR_LOG_LEVEL=warn",
		// The fake admin API answers on loopback.
		"OPERATOR_ALLOWED_UPDATE_ENDPOINTS=127.0.0.0/8")
	start := time.Now()
	op := startOperator(b, env)
	waitFleetSettled(b, nss, perNamespace)
	f := &fleet{namespaces: map[string]bool{}, op: op, adminRequests: adminRequests, settle: time.Since(start)}
	for _, ns := range nss {
		f.namespaces[ns] = true
	}
	return f
}

// requestCount is the audited operator's requests by verb and resource.
type requestCount struct {
	total  int
	byKind map[string]int
	// others counts requests about objects of other namespaces: earlier
	// tests' ObjectStores the operator watches too, whose namespaces are
	// being torn down.
	others int
}

func (r requestCount) String() string {
	var kinds []string
	for k, n := range r.byKind {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ", ")
}

// distinctRequests counts the audited operator's requests received in
// [from, to), a watch once: cluster-wide ones and those about objects of
// the fleet's namespaces and the operator's.
func (f *fleet) distinctRequests(t testing.TB, from, to time.Time) requestCount {
	seen := map[string]bool{}
	r := requestCount{byKind: map[string]int{}}
	for _, ev := range auditedRequests(t, from, to) {
		if seen[ev.AuditID] {
			continue // a watch's second stage
		}
		seen[ev.AuditID] = true
		if ns := ev.ObjectRef.Namespace; ns != "" && ns != cluster.AuditedNamespace && !f.namespaces[ns] {
			r.others++
			continue
		}
		r.total++
		r.byKind[ev.Verb+" "+ev.ObjectRef.Resource]++
	}
	return r
}

// waitFleetSettled polls until every ObjectStore of nss (perNamespace
// each) shows BinaryAvailable, CertificatesReady and VersionCurrent True.
func waitFleetSettled(b testing.TB, nss []string, perNamespace int) {
	want := map[string]bool{}
	for _, ns := range nss {
		want[ns] = true
	}
	var missing string
	require.Eventually(b, func() bool {
		list, err := dyn(b).Resource(apiv1.Resource).List(b.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		settled := 0
		missing = ""
		for _, u := range list.Items {
			if !want[u.GetNamespace()] {
				continue
			}
			store, err := apiv1.FromUnstructured(&u)
			if err != nil {
				continue
			}
			ok := true
			for _, typ := range []string{apiv1.ConditionBinaryAvailable, apiv1.ConditionCertificatesReady, apiv1.ConditionVersionCurrent} {
				if c := apimeta.FindStatusCondition(store.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
					ok = false
					if missing == "" {
						missing = fmt.Sprintf("%s/%s %s: %+v", u.GetNamespace(), u.GetName(), typ, c)
					}
				}
			}
			if ok {
				settled++
			}
		}
		return settled == len(nss)*perNamespace
	}, 20*time.Minute, 2*time.Second, "every ObjectStore settled; e.g. %s", missing)
}

// currentAdmin is a MinIO admin API whose nodes all run release, and
// which counts the requests it answers.
func currentAdmin(b testing.TB, release string, nodes int) (*httptest.Server, *atomic.Int64) {
	rt, err := time.Parse("2006-01-02T15-04-05Z", strings.TrimPrefix(release, "RELEASE."))
	require.NoError(b, err)
	var info madmin.InfoMessage
	for i := range nodes {
		info.Servers = append(info.Servers, madmin.ServerProperties{Endpoint: fmt.Sprintf("127.0.0.1:%d", 9000+i),
			State: string(madmin.ItemOnline), Version: rt.Format(time.RFC3339)})
	}
	body, err := json.Marshal(info)
	require.NoError(b, err)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/minio/health/cluster" {
			return // healthy, a node may go down: rollouts go on
		}
		if !strings.HasSuffix(r.URL.Path, "/info") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv, &requests
}
