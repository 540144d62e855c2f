package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
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

// monitoringNS is where the test renders the chart's monitoring objects.
const monitoringNS = "osop-monitoring"

// pendingMetrics are metrics the chart's alerts or dashboard read that
// are exempt from the existence check, with why.
var pendingMetrics = map[string]string{
	// Pending: the fleet failure budget's halt gauge (updates), added on
	// another branch. Once merged it still has a series only for a
	// release in the halt record, so it stays exempt (its own tests
	// cover it).
	"objectstore_operator_updates_halted": "updates (pending merge; a series only once a release has failures)",
}

// renderMonitoring renders the chart with the PrometheusRule, the
// dashboard and the ServiceMonitor on, and returns the PrometheusRule and
// the dashboard (the ConfigMap's JSON, decoded).
func renderMonitoring(t *testing.T) (rule *unstructured.Unstructured, dashboard map[string]any) {
	t.Helper()
	out := helm(t, "template", "osop", chartDir(t), "-n", monitoringNS,
		"--set", "prometheusRule.enabled=true,dashboard.enabled=true,serviceMonitor.enabled=true")
	dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: obj}
		switch {
		case u.GetKind() == "PrometheusRule":
			rule = u
		case u.GetKind() == "ConfigMap" && u.GetLabels()["grafana_dashboard"] == "1":
			raw, _, _ := unstructured.NestedString(obj, "data", "object-store-operator.json")
			require.NoError(t, json.Unmarshal([]byte(raw), &dashboard), "the dashboard is JSON")
		case u.GetKind() == "ServiceMonitor":
			endpoints, _, _ := unstructured.NestedSlice(obj, "spec", "endpoints")
			require.Len(t, endpoints, 1)
			assert.Equal(t, true, endpoints[0].(map[string]any)["honorLabels"], "per-ObjectStore series keep the tenant's namespace")
		}
	}
	pods := helm(t, "template", "osop", chartDir(t), "-n", monitoringNS, "--set", "podMonitor.enabled=true")
	assert.Contains(t, pods, "kind: PodMonitor")
	assert.Contains(t, pods, "honorLabels: true", "the PodMonitor too keeps the tenant's namespace")
	require.NotNil(t, rule, "prometheusRule.enabled renders a PrometheusRule")
	require.NotNil(t, dashboard, "dashboard.enabled renders the dashboard ConfigMap")
	// The schema types the monitoring values too.
	out, err := runHelm(t, "template", "osop", chartDir(t), "--set", "prometheusRule.enabled=true", "--set-string", "prometheusRule.binaryUnavailableFor=soon")
	require.Error(t, err, "a duration that Prometheus would refuse is refused at render")
	assert.Contains(t, out, "/prometheusRule/binaryUnavailableFor")
	def := helm(t, "template", "osop", chartDir(t), "-n", monitoringNS)
	assert.NotContains(t, def, "kind: PrometheusRule", "opt-in")
	assert.NotContains(t, def, "grafana_dashboard", "opt-in")
	return rule, dashboard
}

// ruleExpressions are the PromQL expressions of the rule, by alert.
func ruleExpressions(t *testing.T, rule *unstructured.Unstructured) map[string]string {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	require.NoError(t, err)
	exprs := map[string]string{}
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			exprs[r["alert"].(string)] = r["expr"].(string)
		}
	}
	return exprs
}

// dashboardExpressions are the PromQL expressions of the dashboard's panels, by panel title.
func dashboardExpressions(t *testing.T, dashboard map[string]any) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	for _, p := range dashboard["panels"].([]any) {
		p := p.(map[string]any)
		for i, target := range p["targets"].([]any) {
			exprs[fmt.Sprintf("%s/%d", p["title"], i)] = target.(map[string]any)["expr"].(string)
		}
	}
	return exprs
}

var metricName = regexp.MustCompile(`\bobjectstore_operator_[a-z0-9_]+`)

// promtool is Prometheus' rule checker (Debian's prometheus package;
// make tools installs it). Missing, the test fails: CI must run it.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is missing: make tools installs it (Debian package prometheus)")
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// TestMonitoringRulesAndDashboardReadWhatTheOperatorServes renders the
// chart's PrometheusRule and dashboard, has the apiserver admit them,
// checks the rules with promtool (syntax, and that the alerts fire on the
// series they are meant for), and checks that every metric any
// expression reads is on a running operator's /metrics, and that every
// metric there is documented.
func TestMonitoringRulesAndDashboardReadWhatTheOperatorServes(t *testing.T) {
	rule, dashboard := renderMonitoring(t)
	alerts, panels := ruleExpressions(t, rule), dashboardExpressions(t, dashboard)
	for _, name := range []string{"ObjectStoreUpdateFailed", "ObjectStoreUpdatesHalted", "ObjectStoreBinaryUnavailable",
		"ObjectStoreOperatorCertificateExpiring", "ObjectStoreOperatorReplicaNotReady", "ObjectStoreOperatorStoreNearlyFull"} {
		assert.Contains(t, alerts, name)
	}
	for _, title := range []string{"Fleet release distribution/0", "Updates by outcome/0", "Restarts/0", "Download throughput/0", "Certificate expiry/0"} {
		assert.Contains(t, panels, title)
	}

	// Admitted as a cluster with the Prometheus Operator would.
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	ensureMonitoringCRDs(t)
	if _, err := adminClient(t).CoreV1().Namespaces().Get(t.Context(), monitoringNS, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = adminClient(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoringNS}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_ = adminClient(t).CoreV1().Namespaces().Delete(context.Background(), monitoringNS, metav1.DeleteOptions{})
	})
	_, err = dyn(t).Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}).
		Namespace(monitoringNS).Create(t.Context(), rule, metav1.CreateOptions{})
	require.NoError(t, err, "the apiserver admits the PrometheusRule")

	// promtool: the rules as Prometheus loads them (JSON is YAML).
	dir := t.TempDir()
	rules, err := json.Marshal(map[string]any{"groups": rule.Object["spec"].(map[string]any)["groups"]})
	require.NoError(t, err)
	rulesFile := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rulesFile, rules, 0o600))
	t.Log(promtool(t, "check", "rules", rulesFile))
	promtoolAlertTests(t, dir, rule)

	// Every metric read exists on a running operator's /metrics, with a
	// tenant whose condition and release series exist.
	opNS := operatorNamespace(t)
	op := startOperator(t, k8sEnv(opNS))
	ensureCRD(t)
	tenantNS := operatorNamespace(t)
	keyPairSecret(t, tenantNS, "tenant-a-tls", true)
	statefulSet(t, tenantNS, "tenant-a")
	applyYAML(t, objectStoreYAML(tenantNS, "tenant-a", []string{"tenant-a-tls"}, nil, nil))
	require.Eventually(t, func() bool { return condition(t, tenantNS, "tenant-a").Status == metav1.ConditionTrue }, 30*time.Second, 50*time.Millisecond)
	// status.release is MinIO's answer to the updater; no MinIO runs here,
	// so the test writes it as the updater would.
	_, err = dyn(t).Resource(apiv1.Resource).Namespace(tenantNS).Patch(t.Context(), "tenant-a", types.MergePatchType,
		[]byte(`{"status":{"release":"`+release+`"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	want := map[string][]string{} // metric -> the alerts and panels reading it
	for where, expr := range alerts {
		for _, m := range metricName.FindAllString(expr, -1) {
			want[m] = append(want[m], "alert "+where)
		}
	}
	for where, expr := range panels {
		for _, m := range metricName.FindAllString(expr, -1) {
			want[m] = append(want[m], "panel "+where)
		}
	}
	missing := func(metrics string) []string {
		var out []string
		for m, users := range want {
			if _, pending := pendingMetrics[m]; !pending && !exposes(metrics, m) {
				out = append(out, fmt.Sprintf("%s (read by %s)", m, strings.Join(users, ", ")))
			}
		}
		sort.Strings(out)
		return out
	}
	// The condition runs off the test goroutine; the last answer is kept for the message.
	var lastMissing atomic.Value
	served := assert.Eventually(t, func() bool {
		m := missing(scrape(op))
		lastMissing.Store(m)
		return len(m) == 0
	}, 60*time.Second, 200*time.Millisecond)
	require.True(t, served, "metrics the chart's alerts and dashboard read but the operator does not serve: %v", lastMissing.Load())
	metrics := scrape(op)
	assert.Contains(t, metrics, fmt.Sprintf(`objectstore_operator_objectstore_release{name="tenant-a",namespace="%s",release="%s"} 1`, tenantNS, release))
	for m, owner := range pendingMetrics {
		if exposes(metrics, m) {
			t.Logf("%s (from %s) is served now: drop it from pendingMetrics", m, owner)
		}
	}

	// Every metric the operator serves is documented.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "monitoring.md"))
	require.NoError(t, err)
	for _, line := range strings.Split(metrics, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok && strings.HasPrefix(name, "objectstore_operator_") {
			name = strings.Fields(name)[0]
			assert.Contains(t, string(doc), "`"+name+"`", "%s is not documented in docs/monitoring.md", name)
		}
	}
}

// scrape reads the operator's /metrics, or "" when it does not answer.
func scrape(op *operator) string {
	resp, err := http.Get("http://" + op.metricsAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// exposes reports whether the exposition has a sample of metric (a series
// name: a histogram's _bucket, _sum or _count included).
func exposes(metrics, metric string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `[{ ]`).MatchString(metrics)
}

// promtoolAlertTests has promtool evaluate the rules (without their
// annotations, which are prose) on series as two operator replicas export
// them, and checks each alert fires when it should, once per ObjectStore
// however many replicas export it, and not before its "for".
func promtoolAlertTests(t *testing.T, dir string, rule *unstructured.Unstructured) {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	require.NoError(t, err)
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			delete(r.(map[string]any), "annotations")
		}
	}
	rules, err := json.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bare.yaml"), rules, 0o600))
	ns := monitoringNS
	tests := fmt.Sprintf(`rule_files: [bare.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # Two replicas export the same ObjectStore series.
      - series: 'objectstore_operator_objectstore_condition{namespace="t1",name="a",type="VersionCurrent",status="False",reason="UpdateFailed",pod="p0"}'
        values: '1x30'
      - series: 'objectstore_operator_objectstore_condition{namespace="t1",name="a",type="VersionCurrent",status="False",reason="UpdateFailed",pod="p1"}'
        values: '1x30'
      - series: 'objectstore_operator_objectstore_condition{namespace="t1",name="b",type="BinaryAvailable",status="False",reason="StoreFull",pod="p0"}'
        values: '1x30'
      - series: 'objectstore_operator_objectstore_condition{namespace="t1",name="c",type="BinaryAvailable",status="True",reason="Available",pod="p0"}'
        values: '1x30'
      - series: 'objectstore_operator_updates_halted{release="RELEASE.2026-02-20T10-00-00Z",namespace="%[1]s",pod="p0"}'
        values: '1x30'
      - series: 'objectstore_operator_store_size_bytes{namespace="%[1]s",pod="p0"}'
        values: '950x30'
      - series: 'objectstore_operator_store_max_bytes{namespace="%[1]s",pod="p0"}'
        values: '1000x30'
      - series: 'objectstore_operator_store_size_bytes{namespace="%[1]s",pod="p1"}'
        values: '100x30'
      - series: 'objectstore_operator_store_max_bytes{namespace="%[1]s",pod="p1"}'
        values: '1000x30'
      # Expires one day after the epoch: within 14 days from the start.
      - series: 'objectstore_operator_serving_certificate_expiry_timestamp_seconds{namespace="%[1]s",pod="p0"}'
        values: '86400x180'
      - series: 'objectstore_operator_ready{namespace="%[1]s",pod="p1",check="namespace-claim"}'
        values: '0x30'
      - series: 'objectstore_operator_ready{namespace="%[1]s",pod="p0",check="namespace-claim"}'
        values: '1x30'
      - series: 'up{namespace="%[1]s",job="object-store-operator",pod="p1"}'
        values: '0x30'
      - series: 'up{namespace="%[1]s",job="object-store-operator",pod="p0"}'
        values: '1x30'
      - series: 'objectstore_operator_leader{namespace="%[1]s",pod="p0"}'
        values: '0x30'
      - series: 'objectstore_operator_sync_panics_total{namespace="%[1]s",pod="p0",controller="updates"}'
        values: '0 0 1x28'
    alert_rule_test:
      - {eval_time: 2m, alertname: ObjectStoreUpdateFailed, exp_alerts: []}
      - eval_time: 10m
        alertname: ObjectStoreUpdateFailed
        exp_alerts:
          - exp_labels: {severity: warning, namespace: t1, name: a}
      - {eval_time: 10m, alertname: ObjectStoreBinaryUnavailable, exp_alerts: []}
      - eval_time: 20m
        alertname: ObjectStoreBinaryUnavailable
        exp_alerts:
          - exp_labels: {severity: warning, namespace: t1, name: b, reason: StoreFull}
      - eval_time: 1m
        alertname: ObjectStoreUpdatesHalted
        exp_alerts:
          - exp_labels: {severity: critical, release: RELEASE.2026-02-20T10-00-00Z}
      - eval_time: 20m
        alertname: ObjectStoreOperatorStoreNearlyFull
        exp_alerts:
          - exp_labels: {severity: warning, namespace: %[1]s, pod: p0}
      - eval_time: 2h
        alertname: ObjectStoreOperatorCertificateExpiring
        exp_alerts:
          - exp_labels: {severity: warning, namespace: %[1]s, pod: p0}
      - eval_time: 15m
        alertname: ObjectStoreOperatorReplicaNotReady
        exp_alerts:
          - exp_labels: {severity: warning, namespace: %[1]s, pod: p1, check: namespace-claim}
      - eval_time: 15m
        alertname: ObjectStoreOperatorReplicaDown
        exp_alerts:
          - exp_labels: {severity: warning, namespace: %[1]s, job: object-store-operator, pod: p1}
      - {eval_time: 15m, alertname: ObjectStoreOperatorAbsent, exp_alerts: []}
      - eval_time: 10m
        alertname: ObjectStoreOperatorNoLeader
        exp_alerts:
          - exp_labels: {severity: warning}
      - eval_time: 5m
        alertname: ObjectStoreOperatorSyncPanics
        exp_alerts:
          - exp_labels: {severity: warning, namespace: %[1]s, pod: p0, controller: updates}
  # No replica has a target at all.
  - interval: 1m
    input_series:
      - series: 'up{namespace="other",job="object-store-operator",pod="p0"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 15m
        alertname: ObjectStoreOperatorAbsent
        exp_alerts:
          - exp_labels: {severity: critical, namespace: %[1]s}
`, ns)
	testFile := filepath.Join(dir, "alerts_test.yaml")
	require.NoError(t, os.WriteFile(testFile, []byte(tests), 0o600))
	t.Log(promtool(t, "test", "rules", testFile))
}
