package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/object-store-operator/operator/autocert"
)

// chartKubeVersion is the Kubernetes version the chart is rendered for:
// the pinned control plane's (docs/development.md). bin/helm is built
// without Helm's version ldflags, so without --kube-version it renders as
// for Kubernetes 1.20 and the chart's kubeVersion refuses it.
const chartKubeVersion = "v1.36.3"

// helmChart runs helm (template or lint) on the chart with values and
// returns its stdout, or its stderr as the error.
func helmChart(t *testing.T, values string, args ...string) (string, error) {
	t.Helper()
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(valuesFile, []byte(values), 0o600))
	home := t.TempDir()
	chart := filepath.Join("..", "..", "helm", "object-store-operator")
	full := append([]string{args[0]}, args[1:]...)
	if args[0] == "template" {
		full = append([]string{"template", "osop", chart, "-n", "ops"}, args[1:]...)
	} else {
		full = append(full, chart)
	}
	full = append(full, "-f", valuesFile, "--kube-version", chartKubeVersion)
	cmd := exec.Command(helmBinary(t), full...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(stderr.String() + string(out))
	}
	return string(out), nil
}

// renderObjects renders the chart with values and returns its objects by
// kind.
func renderObjects(t *testing.T, values string, args ...string) map[string][]map[string]any {
	t.Helper()
	out, err := helmChart(t, values, append([]string{"template"}, args...)...)
	require.NoError(t, err)
	objects := map[string][]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objects
		}
		require.NoError(t, err)
		if kind, ok := raw["kind"].(string); ok {
			objects[kind] = append(objects[kind], raw)
		}
	}
}

func renderedDeployment(t *testing.T, values string) appsv1.Deployment {
	t.Helper()
	deps := renderObjects(t, values)["Deployment"]
	require.Len(t, deps, 1)
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(deps[0], &d))
	return d
}

// A wrong type or a misspelt value is refused before anything is applied,
// with a message that names the value.
func TestChartValuesSchemaRejectsWrongTypesNamingTheValue(t *testing.T) {
	tests := []struct {
		name, values, want string
	}{
		{"replicas as words", `replicas: "two"`, "replicas"},
		{"a misspelt value", `replica: 2`, "replica"},
		{"a port out of range", "service:\n  upgradePort: 70000", "upgradePort"},
		{"a flag as a string", "networkPolicy:\n  enabled: \"yes\"", "enabled"},
		{"extraEnv without a name", "global:\n  operator:\n    extraEnv:\n      - value: x", "name"},
		{"a strategy Kubernetes does not know", "strategy:\n  type: BlueGreen", "type"},
		{"extraVolumes as a map", "extraVolumes:\n  certs: {}", "extraVolumes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helmChart(t, tt.values, "template")
			require.Error(t, err, "helm template accepted %q", tt.values)
			assert.Contains(t, err.Error(), "values don't meet the specifications of the schema")
			assert.Contains(t, err.Error(), tt.want)
			_, err = helmChart(t, tt.values, "lint", "--strict")
			require.Error(t, err, "helm lint --strict accepted %q", tt.values)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	out, err := helmChart(t, "", "lint", "--strict")
	require.NoError(t, err, "the default values lint clean")
	assert.Contains(t, out, "0 chart(s) failed")
}

// The operator picks its signer (OPERATOR_CSR_SIGNER_NAME, else EKS
// detection from the nodes, else kubelet-serving); the chart grants
// approval for whichever it may pick, without re-deciding.
func TestChartGrantsApprovalForEverySignerTheOperatorMayPick(t *testing.T) {
	approveSigners := func(values string) []string {
		cluster, _ := renderRBAC(t, values)
		var names []string
		for _, r := range cluster {
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "signers") && slices.Contains(rule.Verbs, "approve") {
					names = append(names, rule.ResourceNames...)
				}
			}
		}
		slices.Sort(names)
		return names
	}
	assert.Equal(t, []string{autocert.EKSSigner, autocert.DefaultSigner}, approveSigners(""),
		"the operator detects EKS at run time: both signers it may choose")
	assert.Equal(t, []string{"example.com/signer"}, approveSigners(chartRenders["signer set"]),
		"a signer set in extraEnv is the only one the operator uses")

	_, err := helmChart(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_CSR_SIGNER_NAME
        valueFrom: {configMapKeyRef: {name: signer, key: name}}
`, "template")
	require.Error(t, err, "a signer the chart cannot read gets no grant it could name")
	assert.Contains(t, err.Error(), "OPERATOR_CSR_SIGNER_NAME")

	_, tmpl, err := readChartFile("templates/_helpers.tpl")
	require.NoError(t, err)
	assert.NotContains(t, tmpl, `default "kubernetes.io/kubelet-serving"`, "the chart does not re-decide the signer")
}

func readChartFile(name string) (string, string, error) {
	p := filepath.Join("..", "..", "helm", "object-store-operator", name)
	b, err := os.ReadFile(p)
	return p, string(b), err
}

// The kubelet kills the container terminationGracePeriodSeconds after it
// starts stopping the pod, preStop included: the period must outlast the
// preStop sleep plus OPERATOR_SHUTDOWN_GRACE, or downloads are cut
// mid-drain (Kubernetes' default of 30 s equals the default grace).
func TestChartTerminationGraceOutlastsPreStopAndShutdownGrace(t *testing.T) {
	check := func(values string, grace int64) appsv1.Deployment {
		t.Helper()
		d := renderedDeployment(t, values)
		spec := d.Spec.Template.Spec
		require.NotNil(t, spec.TerminationGracePeriodSeconds)
		lc := spec.Containers[0].Lifecycle
		require.NotNil(t, lc, "a preStop hook")
		require.NotNil(t, lc.PreStop)
		require.NotNil(t, lc.PreStop.Sleep, "the image has no shell: the kubelet sleeps (PodLifecycleSleepAction)")
		sleep := lc.PreStop.Sleep.Seconds
		assert.Positive(t, sleep)
		assert.Greater(t, *spec.TerminationGracePeriodSeconds, sleep+grace, "preStop %ds + shutdown grace %ds", sleep, grace)
		return d
	}
	check("", 30)
	check(`global:
  operator:
    extraEnv:
      - name: OPERATOR_SHUTDOWN_GRACE
        value: 2m30s
`, 150)
	check(`global:
  operator:
    extraEnv:
      - name: OPERATOR_SHUTDOWN_GRACE
        value: 1500ms
`, 2)
	d := check("terminationGracePeriodSeconds: 120", 30)
	assert.EqualValues(t, 120, *d.Spec.Template.Spec.TerminationGracePeriodSeconds, "an explicit value that suffices is kept")

	_, err := helmChart(t, `terminationGracePeriodSeconds: 30`, "template")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "terminationGracePeriodSeconds")
	assert.Contains(t, err.Error(), "OPERATOR_SHUTDOWN_GRACE")
	_, err = helmChart(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_SHUTDOWN_GRACE
        value: soon
`, "template")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `OPERATOR_SHUTDOWN_GRACE: "soon"`)
}

// Pods carry the recommended labels; the selector (immutable) stays the
// two labels it always had, whatever podLabels says.
func TestChartPodLabelsKeepTheSelector(t *testing.T) {
	d := renderedDeployment(t, `podLabels:
  team: storage
  app.kubernetes.io/name: something-else
`)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "object-store-operator", "app.kubernetes.io/instance": "osop"}, d.Spec.Selector.MatchLabels)
	labels := d.Spec.Template.Labels
	for _, k := range []string{"name", "instance", "version", "component", "managed-by", "part-of"} {
		assert.NotEmpty(t, labels["app.kubernetes.io/"+k], k)
	}
	assert.Equal(t, "object-store-operator", labels["app.kubernetes.io/name"], "podLabels cannot break the selector")
	assert.Equal(t, "storage", labels["team"])

	d = renderedDeployment(t, `strategy:
  type: RollingUpdate
  rollingUpdate: {maxSurge: 0, maxUnavailable: 1}
extraVolumes:
  - name: serving-cert
    secret: {secretName: operator-files-tls}
extraVolumeMounts:
  - name: serving-cert
    mountPath: /tmp/k8s-webhook-server/serving-certs
    readOnly: true
`)
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, "1", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String())
	vols := d.Spec.Template.Spec.Volumes
	assert.Equal(t, "operator-files-tls", vols[len(vols)-1].Secret.SecretName)
	mounts := d.Spec.Template.Spec.Containers[0].VolumeMounts
	assert.Equal(t, "/tmp/k8s-webhook-server/serving-certs", mounts[len(mounts)-1].MountPath)
}

func TestChartNetworkPolicyAndPodMonitorAreOptIn(t *testing.T) {
	def := renderObjects(t, "")
	assert.Empty(t, def["NetworkPolicy"])
	assert.Empty(t, def["PodMonitor"])

	objs := renderObjects(t, `watchNamespaces: [tenant-a, tenant-b]
networkPolicy:
  enabled: true
podMonitor:
  enabled: true
`)
	require.Len(t, objs["NetworkPolicy"], 1)
	var np networkingv1.NetworkPolicy
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs["NetworkPolicy"][0], &np))
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, "egress (apiserver, registries) is left alone")
	require.Len(t, np.Spec.Ingress, 2)
	upgrade, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
	assert.Equal(t, int32(4221), upgrade.Ports[0].Port.IntVal)
	assert.Equal(t, []string{"tenant-a", "tenant-b"}, upgrade.From[0].NamespaceSelector.MatchExpressions[0].Values, "by default the watched namespaces")
	assert.Equal(t, int32(8080), metrics.Ports[0].Port.IntVal)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "monitoring"}, metrics.From[0].NamespaceSelector.MatchLabels)
	require.Len(t, objs["PodMonitor"], 1)

	objs = renderObjects(t, `networkPolicy:
  enabled: true
  upgrade:
    namespaceSelector: {matchLabels: {aistor.min.io/tenant: "true"}}
  metrics:
    namespaceSelector: {matchLabels: {team: observability}}
    podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
`)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs["NetworkPolicy"][0], &np))
	assert.Equal(t, map[string]string{"aistor.min.io/tenant": "true"}, np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "prometheus"}, np.Spec.Ingress[1].From[0].PodSelector.MatchLabels,
		"namespace and pod selector in one peer: both must match")

	_, err := helmChart(t, "serviceMonitor:\n  enabled: true\npodMonitor:\n  enabled: true\n", "template")
	require.Error(t, err, "both would scrape every pod twice")
	assert.Contains(t, err.Error(), "podMonitor")
}

// OPERATOR_SHUTDOWN_GRACE is a Go duration of at least 0: "0" is one the
// operator takes (no drain), and the chart must take it too. Set through
// valueFrom the chart cannot read it, so it cannot size the termination
// grace from it: before, it silently assumed 30s, and a longer grace was
// cut by the kubelet mid-drain; now it asks for an explicit
// terminationGracePeriodSeconds.
func TestChartShutdownGraceIsReadAsTheOperatorReadsIt(t *testing.T) {
	d := renderedDeployment(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_SHUTDOWN_GRACE
        value: "0"
`)
	require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	assert.EqualValues(t, 5+0+10, *d.Spec.Template.Spec.TerminationGracePeriodSeconds)

	fromSecret := `global:
  operator:
    extraEnv:
      - name: OPERATOR_SHUTDOWN_GRACE
        valueFrom:
          configMapKeyRef: {name: operator-settings, key: shutdownGrace}
`
	_, err := helmChart(t, fromSecret, "template")
	require.Error(t, err, "the chart cannot know the grace it must outlast")
	assert.Contains(t, err.Error(), "terminationGracePeriodSeconds")
	d = renderedDeployment(t, fromSecret+"terminationGracePeriodSeconds: 400\n")
	assert.EqualValues(t, 400, *d.Spec.Template.Spec.TerminationGracePeriodSeconds, "an explicit period is the platform's word")
}

// makeImage is the image `make image` tags, read from make's dry run
// (docker build ... -t <image> .) with the given make arguments.
func makeImage(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-n", "image"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make -n image: %s", out)
	fields := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	i := slices.Index(fields, "-t")
	require.Positive(t, i, "make image tags its image: %s", out)
	return fields[i+1]
}

// The chart's default image is the one `make image` builds, so the three
// install steps (build and load or push, helm install, helm test) run what
// was built; a registry set on both sides agrees too.
func TestChartDefaultImageIsWhatMakeImageBuilds(t *testing.T) {
	_, chartYAML, err := readChartFile("Chart.yaml")
	require.NoError(t, err)
	image := func(values string) string {
		t.Helper()
		return renderedDeployment(t, values).Spec.Template.Spec.Containers[0].Image
	}
	def := image("")
	assert.Equal(t, makeImage(t), def)
	assert.Contains(t, chartYAML, `appVersion: "`+strings.TrimPrefix(def, "object-store-operator:")+`"`, "the tag is the chart's appVersion")
	assert.Equal(t, makeImage(t, "REGISTRY=registry.example.com/platform"),
		image("image:\n  registry: registry.example.com/platform\n"), "make image REGISTRY=... tags what image.registry=... runs")

	assert.Equal(t, "registry.example.com/platform/object-store-operator:0.1.1",
		image("image:\n  registry: registry.example.com/platform/\n  tag: \"0.1.1\"\n"))
	digest := "sha256:" + strings.Repeat("ab", 32)
	assert.Equal(t, "registry.example.com/osop@"+digest,
		image("image:\n  registry: registry.example.com\n  repository: osop\n  tag: ignored\n  digest: "+digest+"\n"),
		"a digest names the bytes; the tag is left out")
	_, err = helmChart(t, "image:\n  digest: latest\n", "template")
	require.Error(t, err, "a digest that is not one is refused")
	assert.Contains(t, err.Error(), "digest")
}

// A variable the chart sets, set again through extraEnv, appears once with
// extraEnv's value: server-side apply (Argo CD, Helm 4) refuses a container
// whose env names a variable twice.
func TestChartExtraEnvOverridesTheChartsOwnVariablesOnce(t *testing.T) {
	d := renderedDeployment(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_LOG_LEVEL
        value: debug
      - name: OPERATOR_STORE_MAX_BYTES
        value: 2Gi
      - name: OPERATOR_NAMESPACE
        value: ops
      - name: OPERATOR_LOG_LEVEL
        value: warn
`)
	env := d.Spec.Template.Spec.Containers[0].Env
	var names []string
	values := map[string]string{}
	for _, e := range env {
		names = append(names, e.Name)
		values[e.Name] = e.Value
		if e.Name == "OPERATOR_NAMESPACE" {
			assert.Nil(t, e.ValueFrom, "extraEnv's entry replaces the chart's whole, valueFrom included")
		}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	assert.Equal(t, len(sorted), len(slices.Compact(sorted)), "every name once: %v", names)
	assert.Equal(t, "2Gi", values["OPERATOR_STORE_MAX_BYTES"], "extraEnv wins over the chart's 3/4 of updates.sizeLimit")
	assert.Equal(t, "ops", values["OPERATOR_NAMESPACE"])
	assert.Equal(t, "warn", values["OPERATOR_LOG_LEVEL"], "of a name given twice in extraEnv, the last wins")
	assert.Equal(t, "OPERATOR_NAMESPACE", names[0], "the chart's variables keep their place")
	assert.Equal(t, "OPERATOR_LOG_LEVEL", names[len(names)-1], "extraEnv's own follow")

	def := renderedDeployment(t, "").Spec.Template.Spec.Containers[0].Env
	var defNames []string
	for _, e := range def {
		defNames = append(defNames, e.Name)
	}
	assert.Equal(t, []string{"OPERATOR_NAMESPACE", "OPERATOR_UPGRADE_ADDRESS", "OPERATOR_METRICS_ADDRESS", "OPERATOR_UPDATE_DIR",
		"OPERATOR_CLUSTER_TRUST_BUNDLE_OWNER", "OPERATOR_STORE_MAX_BYTES"}, defNames)
	assert.Equal(t, "3072Mi", def[len(def)-1].Value, "3/4 of the default 4Gi")
}

// With more than one replica, the replicas are spread across zones and
// nodes and prefer nodes without another replica, without ever blocking
// scheduling by default; each part can be changed or turned off.
func TestChartSpreadsReplicasAcrossZonesAndNodes(t *testing.T) {
	spec := renderedDeployment(t, "replicas: 3").Spec.Template.Spec
	var keys []string
	for _, c := range spec.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		assert.Equal(t, corev1.ScheduleAnyway, c.WhenUnsatisfiable, "a preference: a one-zone cluster still schedules")
		assert.Equal(t, []string{"pod-template-hash"}, c.MatchLabelKeys, "one revision at a time: a rolling update's old pods do not skew the new")
		assert.Equal(t, "osop", c.LabelSelector.MatchLabels["app.kubernetes.io/instance"])
	}
	assert.Equal(t, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, keys)
	require.NotNil(t, spec.Affinity)
	require.NotNil(t, spec.Affinity.PodAntiAffinity)
	soft := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	require.Len(t, soft, 1, "soft by default")
	assert.EqualValues(t, 100, soft[0].Weight)
	assert.Equal(t, "kubernetes.io/hostname", soft[0].PodAffinityTerm.TopologyKey)
	assert.Empty(t, spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)

	one := renderedDeployment(t, "").Spec.Template.Spec
	assert.Empty(t, one.TopologySpreadConstraints, "nothing to spread with one replica")
	assert.Nil(t, one.Affinity)

	spec = renderedDeployment(t, `replicas: 2
topologySpread:
  zoneTopologyKey: ""
  whenUnsatisfiable: DoNotSchedule
podAntiAffinity:
  type: hard
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`).Spec.Template.Spec
	require.Len(t, spec.TopologySpreadConstraints, 1, "no zone spread")
	assert.Equal(t, corev1.DoNotSchedule, spec.TopologySpreadConstraints[0].WhenUnsatisfiable)
	require.Len(t, spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 1, "hard")
	assert.NotNil(t, spec.Affinity.NodeAffinity, "the affinity value is kept beside it")

	spec = renderedDeployment(t, `replicas: 2
topologySpread:
  enabled: false
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        podAffinityTerm: {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: x}}}
`).Spec.Template.Spec
	assert.Empty(t, spec.TopologySpreadConstraints)
	require.Len(t, spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	assert.EqualValues(t, 5, spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight,
		"an anti-affinity of the user's replaces the chart's")
}

// The PodDisruptionBudget takes minAvailable or maxUnavailable, never
// both (the API refuses both), and keeps one replica up by default.
func TestChartDisruptionBudgetTakesMinAvailableOrMaxUnavailable(t *testing.T) {
	pdb := func(values string) policyv1.PodDisruptionBudget {
		t.Helper()
		objs := renderObjects(t, values)["PodDisruptionBudget"]
		require.Len(t, objs, 1)
		var p policyv1.PodDisruptionBudget
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0], &p))
		return p
	}
	def := pdb("replicas: 3")
	require.NotNil(t, def.Spec.MinAvailable)
	assert.Equal(t, "1", def.Spec.MinAvailable.String())
	assert.Nil(t, def.Spec.MaxUnavailable)

	maxU := pdb("replicas: 3\npodDisruptionBudget:\n  maxUnavailable: 34%\n")
	require.NotNil(t, maxU.Spec.MaxUnavailable)
	assert.Equal(t, "34%", maxU.Spec.MaxUnavailable.String())
	assert.Nil(t, maxU.Spec.MinAvailable)

	minA := pdb("replicas: 3\npodDisruptionBudget:\n  minAvailable: 2\n")
	assert.Equal(t, "2", minA.Spec.MinAvailable.String())

	_, err := helmChart(t, "replicas: 3\npodDisruptionBudget:\n  minAvailable: 2\n  maxUnavailable: 1\n", "template")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set minAvailable or maxUnavailable, not both")
	assert.Empty(t, renderObjects(t, "")["PodDisruptionBudget"], "no budget for one replica")
}

// crds.enabled templates the CRDs, from the crds/ files themselves, kept
// on uninstall with crds.keep, as cert-manager's chart does; by default
// they come from crds/ only.
func TestChartTemplatesTheCRDWithCRDsEnabled(t *testing.T) {
	assert.Empty(t, renderObjects(t, "")["CustomResourceDefinition"], "crds/ alone by default (helm template leaves crds/ out)")

	names := []string{"objectstores.aistor.min.io", "namespaceclaims.aistor.min.io"}
	crds := renderObjects(t, "crds:\n  enabled: true\n")["CustomResourceDefinition"]
	require.Len(t, crds, len(names))
	for i, name := range names {
		_, file, err := readChartFile("crds/" + name + ".yaml")
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(file), 4096).Decode(&want))
		assert.Equal(t, want["spec"], crds[i]["spec"], "the template is the crds/ file")
		meta := crds[i]["metadata"].(map[string]any)
		assert.Equal(t, name, meta["name"])
		assert.Equal(t, map[string]any{"helm.sh/resource-policy": "keep"}, meta["annotations"], "kept by default")
		assert.Equal(t, "Helm", meta["labels"].(map[string]any)["app.kubernetes.io/managed-by"])
	}

	crds = renderObjects(t, "crds:\n  enabled: true\n  keep: false\n")["CustomResourceDefinition"]
	require.Len(t, crds, len(names))
	for _, crd := range crds {
		assert.Nil(t, crd["metadata"].(map[string]any)["annotations"], "crds.keep=false: removed with the release")
	}
}

// Every install's NamespaceClaim is named after its namespace and lists
// watchNamespaces as the operator reads them (sorted, each once); none
// is every namespace (internal/claim).
func TestChartMakesTheInstallsNamespaceClaim(t *testing.T) {
	claims := renderObjects(t, "watchNamespaces: [tenant-b, tenant-a, tenant-b]\n")["NamespaceClaim"]
	require.Len(t, claims, 1)
	assert.Equal(t, "ops", claims[0]["metadata"].(map[string]any)["name"])
	assert.Equal(t, map[string]any{"install": "object-store-operator", "namespaces": []any{"tenant-a", "tenant-b"}}, claims[0]["spec"])

	claims = renderObjects(t, "")["NamespaceClaim"]
	require.Len(t, claims, 1)
	assert.Equal(t, map[string]any{"install": "object-store-operator", "namespaces": []any{}}, claims[0]["spec"], "every namespace")
}

// A plain helm template (no cluster: Helm's API list names no kinds)
// renders the admission policy; a cluster whose API list shows it does not
// serve the policy fails the install, naming the value, instead of
// installing without it.
func TestChartRendersTheAdmissionPolicyWithoutACluster(t *testing.T) {
	assert.Len(t, renderObjects(t, "")["ValidatingAdmissionPolicy"], 1, "plain helm template")
	assert.Len(t, renderObjects(t, "")["ValidatingAdmissionPolicyBinding"], 1)
	assert.Len(t, renderObjects(t, "", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")["ValidatingAdmissionPolicy"], 1)

	_, err := helmChart(t, "", "template", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration")
	require.Error(t, err, "the cluster lists its kinds, and not this one")
	assert.Contains(t, err.Error(), "does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy")
	assert.Contains(t, err.Error(), "admissionPolicy.enabled=false")
	objs := renderObjects(t, "admissionPolicy:\n  enabled: false\n", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration")
	assert.Empty(t, objs["ValidatingAdmissionPolicy"], "turned off, it installs without")
}

// testPod renders the chart's helm test pod.
func testPod(t *testing.T, values string) corev1.Pod {
	t.Helper()
	pods := renderObjects(t, values)["Pod"]
	require.Len(t, pods, 1, "one helm test pod")
	var p corev1.Pod
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(pods[0], &p))
	return p
}

// `helm test` fetches the listing from the URL MinIO pods use, trusting
// only the CA the operator publishes for pods in the TLS mode the values
// select (docs/tls.md, the CA pods must trust), and says what to set where
// the chart cannot know that CA.
func TestChartTestPodFetchesTheListingWithTheCAPodsTrust(t *testing.T) {
	type want struct {
		url, secret string
		keys        []string // keys of the Secret(s) mounted at /ca
	}
	check := func(t *testing.T, values string, w want) corev1.Pod {
		t.Helper()
		p := testPod(t, values)
		assert.Equal(t, "test", p.Annotations["helm.sh/hook"], "runs on helm test only")
		assert.Equal(t, corev1.RestartPolicyNever, p.Spec.RestartPolicy)
		c := p.Spec.Containers[0]
		require.Len(t, c.Env, 1)
		assert.Equal(t, w.url, c.Env[0].Value)
		script := strings.Join(c.Args, "\n")
		assert.Contains(t, script, `curl --fail`)
		assert.Contains(t, script, `"binaries"`, "a listing, not just any 200")
		if w.secret == "" {
			assert.Empty(t, p.Spec.Volumes)
			return p
		}
		assert.Contains(t, script, `--cacert "$cacert"`)
		require.Len(t, p.Spec.Volumes, 1)
		var keys []string
		for _, src := range p.Spec.Volumes[0].Projected.Sources {
			assert.Equal(t, w.secret, src.Secret.Name)
			for _, item := range src.Secret.Items {
				keys = append(keys, item.Key)
			}
		}
		assert.Equal(t, w.keys, keys, "never the key")
		assert.Equal(t, "/ca", c.VolumeMounts[0].MountPath)
		// Pod Security restricted.
		assert.True(t, *p.Spec.SecurityContext.RunAsNonRoot)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type)
		assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
		assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
		return p
	}
	t.Run("autocert", func(t *testing.T) {
		p := check(t, "", want{"https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", "object-store-operator-tls", []string{"ca.crt"}})
		assert.Equal(t, "docker.io/curlimages/curl:8.11.1", p.Spec.Containers[0].Image)
	})
	t.Run("autocert elsewhere", func(t *testing.T) {
		check(t, `global:
  operator:
    extraEnv:
      - {name: CLUSTER_DOMAIN, value: corp.example}
      - {name: OPERATOR_AUTOCERT_SECRET_NAME, value: osop-serving}
service:
  upgradePort: 8443
`, want{"https://object-store-operator.ops.svc.corp.example:8443/webhook/v1/update", "osop-serving", []string{"ca.crt"}})
	})
	t.Run("custom certificate", func(t *testing.T) {
		p := check(t, `global:
  operator:
    extraEnv:
      - {name: OPERATOR_AUTO_CERT_DISABLED, value: "on"}
      - {name: OPERATOR_CUSTOM_TLS_SECRET_NAME, value: cm-tls}
`, want{"https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", "cm-tls", []string{"ca.crt", "tls.crt"}})
		assert.True(t, *p.Spec.Volumes[0].Projected.Sources[0].Secret.Optional, "ca.crt when the Secret has one, else the chain")
	})
	t.Run("serving CA override", func(t *testing.T) {
		check(t, `global:
  operator:
    extraEnv:
      - {name: OPERATOR_AUTO_CERT_DISABLED, value: "on"}
      - {name: OPERATOR_CUSTOM_TLS_SECRET_NAME, value: cm-tls}
      - {name: OPERATOR_SERVING_CA_SECRET, value: pods-ca}
`, want{"https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", "pods-ca", []string{"ca.crt"}})
	})
	t.Run("plain HTTP", func(t *testing.T) {
		check(t, `global:
  operator:
    extraEnv:
      - {name: OPERATOR_AUTO_CERT_DISABLED, value: "on"}
`, want{url: "http://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update"})
	})
	t.Run("files without a CA the chart can name", func(t *testing.T) {
		files := `global:
  operator:
    extraEnv:
      - {name: OPERATOR_TLS_CERT_FILE, value: /certs/tls.crt}
      - {name: OPERATOR_TLS_KEY_FILE, value: /certs/tls.key}
`
		p := testPod(t, files)
		assert.Contains(t, strings.Join(p.Spec.Containers[0].Args, "\n"), "set OPERATOR_SERVING_CA_SECRET in global.operator.extraEnv or tests.caSecret")
		check(t, files+"tests:\n  caSecret: files-ca\n",
			want{"https://object-store-operator.ops.svc.cluster.local:4221/webhook/v1/update", "files-ca", []string{"ca.crt"}})
	})
	assert.Empty(t, renderObjects(t, "tests:\n  enabled: false\n")["Pod"])
}
