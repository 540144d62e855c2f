package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// installedTestPod is the helm test pod of the release as Helm stored it
// (helm get hooks).
func installedTestPod(t *testing.T, ns string) corev1.Pod {
	t.Helper()
	out := helm(t, "get", "hooks", "osop", "-n", ns)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if raw["kind"] == "Pod" {
			var p corev1.Pod
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &p))
			return p
		}
	}
	t.Fatalf("no test pod in helm get hooks:\n%s", out)
	return corev1.Pod{}
}

// runTestPodScript runs the test pod's script here, as its container would:
// the Secret keys it mounts are written to a directory in place of /ca, and
// curl connects to the operator's loopback port for the Service's name and
// port (--connect-to, the only thing added). It returns the script's output.
func runTestPodScript(t *testing.T, p corev1.Pod, files map[string][]byte, upgradeAddr string) (string, error) {
	t.Helper()
	c := p.Spec.Containers[0]
	require.Equal(t, []string{"sh", "-c"}, c.Command)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	require.NoError(t, os.MkdirAll(ca, 0o700))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(ca, name), content, 0o600))
	}
	script := strings.ReplaceAll(c.Args[0], "/ca/", ca+"/")
	var url string
	for _, e := range c.Env {
		if e.Name == "URL" {
			url = e.Value
		}
	}
	hostPort := strings.SplitN(strings.TrimPrefix(url, "https://"), "/", 2)[0]
	curl, err := exec.LookPath("curl")
	require.NoError(t, err)
	wrapper := filepath.Join(dir, "bin", "curl")
	require.NoError(t, os.MkdirAll(filepath.Dir(wrapper), 0o700))
	require.NoError(t, os.WriteFile(wrapper, fmt.Appendf(nil, "#!/bin/sh\nexec %s \"$@\" --connect-to %s:%s --retry 1 --retry-delay 1\n", curl, hostPort, upgradeAddr), 0o700))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(wrapper)+":"+os.Getenv("PATH"), "URL="+url)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// `helm test`'s pod, as installed: Pod Security restricted admits it, and
// its own script, run against the operator the chart configured (as the
// chart's ServiceAccount, autocert on a cluster whose kubelet-serving CA is
// not the cluster CA, so with OPERATOR_SERVING_CA_SECRET as docs/tls.md
// says), lists binaries trusting only what it mounts; a CA pods do not
// trust fails it.
func TestHelmTestPodListsTrustingTheCAItMounts(t *testing.T) {
	ensureCRD(t) // serial: a cluster-wide install beside another is refused its namespaces
	created, err := adminClient(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "osop-helmtest-", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ns := created.Name
	t.Cleanup(func() {
		_ = adminClient(t).CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		forgetClaim(t, ns)
	})
	_, err = adminClient(t).CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-serving-ca"},
		Data:       map[string][]byte{"ca.crt": testCluster.KubeletServingCA},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	helm(t, "install", "osop", chartDir(t), "-n", ns, "-f", valuesFile(t, `global:
  operator:
    extraEnv:
      - {name: OPERATOR_SERVING_CA_SECRET, value: kubelet-serving-ca}
`))

	p := installedTestPod(t, ns)
	assert.Equal(t, "test", p.Annotations["helm.sh/hook"])
	_, err = adminClient(t).CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: p.Spec,
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "Pod Security restricted admits the test pod")

	kubeconfig, _ := asChartServiceAccount(t, ns)
	op := startOperator(t, append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig))

	// What the pod mounts at /ca: the keys of the Secret its volume names.
	require.Len(t, p.Spec.Volumes, 1)
	src := p.Spec.Volumes[0].Projected.Sources[0].Secret
	files := map[string][]byte{}
	require.Eventually(t, func() bool {
		s, err := adminClient(t).CoreV1().Secrets(ns).Get(t.Context(), src.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, item := range src.Items {
			files[item.Path] = s.Data[item.Key]
		}
		return len(files["ca.crt"]) > 0
	}, 30*time.Second, 100*time.Millisecond, "Secret %s/%s with ca.crt, which the test pod mounts", ns, src.Name)

	out, err := runTestPodScript(t, p, files, op.upgradeAddr)
	require.NoError(t, err, "helm test's script: %s", out)
	assert.Contains(t, out, "the upgrade server lists: {")
	assert.Contains(t, out, "trusting /", "with --cacert")

	wrongCA, _, _ := testutil.KeyPair(t, nil, []string{"not-the-operators-ca"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	out, err = runTestPodScript(t, p, map[string][]byte{"ca.crt": wrongCA}, op.upgradeAddr)
	require.Error(t, err, "a CA pods do not trust fails the test: %s", out)
	assert.NotContains(t, out, "the upgrade server lists")
}

// An extraEnv override of a variable the chart sets is applied by
// server-side apply, as Argo CD and Helm 4 apply: the apiserver refuses a
// container whose env names a variable twice (env is a list keyed by
// name), which the chart rendered before it merged extraEnv by name.
func TestChartExtraEnvOverrideIsAcceptedByServerSideApply(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	rendered := helm(t, "template", "osop", chartDir(t), "-n", ns, "--show-only", "templates/deployment.yaml", "-f", valuesFile(t, `global:
  operator:
    extraEnv:
      - {name: OPERATOR_STORE_MAX_BYTES, value: 2Gi}
      - {name: OPERATOR_LOG_LEVEL, value: debug}
`))
	manifest := filepath.Join(t.TempDir(), "deployment.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(rendered), 0o600))
	out, err := kubectlErr(t, "apply", "--server-side", "--field-manager", "argocd-controller", "--dry-run=server", "-f", manifest)
	require.NoError(t, err, "server-side apply of the rendered Deployment: %s", out)
	assert.Contains(t, out, "serverside-applied")
}

// crds.enabled on a cluster whose CRD came from crds/ (as every earlier
// install's did): the install fails naming --skip-crds and the commands
// that hand the CRD to the release; after them the release owns it, and
// helm uninstall keeps it (crds.keep) with every ObjectStore. Serial: it
// changes the shared CRD's ownership and restores it.
func TestChartTemplatedCRDIsAdoptedAsToldAndKeptOnUninstall(t *testing.T) {
	ensureCRD(t)
	const crd = "objectstores.aistor.min.io"
	ns, tenant := operatorNamespace(t), operatorNamespace(t)
	t.Cleanup(func() {
		// Back to a CRD no release owns, as ensureCRD left it.
		// Both CRDs: the chart templates the NamespaceClaim's too.
		_, _ = kubectlErr(t, "label", "crd", crd, "namespaceclaims.aistor.min.io", "app.kubernetes.io/managed-by-", "app.kubernetes.io/instance-",
			"app.kubernetes.io/name-", "app.kubernetes.io/part-of-", "app.kubernetes.io/version-", "helm.sh/chart-")
		_, _ = kubectlErr(t, "annotate", "crd", crd, "namespaceclaims.aistor.min.io", "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-", "helm.sh/resource-policy-")
	})
	applyYAML(t, objectStoreYAML(tenant, "kept", nil, nil, nil))
	before, err := dyn(t).Resource(apiv1.Resource).Namespace(tenant).Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err)

	out, err := runHelm(t, "install", "osop", chartDir(t), "-n", ns, "--set", "crds.enabled=true")
	require.Error(t, err, "the CRD from crds/ is not the release's: %s", out)
	assert.Contains(t, out, "install with --skip-crds")
	_, commands, ok := strings.Cut(out, "to let this release take it over: ")
	require.True(t, ok, "the message gives the commands: %s", out)
	commands, _, _ = strings.Cut(commands, " (docs/install.md")
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", commands)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+testCluster.Kubeconfig)
	run, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", commands, run)

	helm(t, "install", "osop", chartDir(t), "-n", ns, "--skip-crds", "--set", "crds.enabled=true")
	owned, err := dyn(t).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(t.Context(), crd, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "keep", owned.GetAnnotations()["helm.sh/resource-policy"])
	assert.Equal(t, "osop", owned.GetAnnotations()["meta.helm.sh/release-name"])
	assert.Equal(t, ns, owned.GetAnnotations()["meta.helm.sh/release-namespace"])

	helm(t, "uninstall", "osop", "-n", ns)
	_, err = dyn(t).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(t.Context(), crd, metav1.GetOptions{})
	require.NoError(t, err, "crds.keep: helm uninstall leaves the CRD")
	after, err := dyn(t).Resource(apiv1.Resource).Namespace(tenant).Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err, "and every ObjectStore")
	assert.Equal(t, before.GetUID(), after.GetUID())
}
