package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// seedValues is the AIStor documentation's example values for a custom
// certificate, verbatim.
const seedValues = `global:
  operator:
    extraEnv:
      - name: OPERATOR_AUTO_CERT_DISABLED
        value: "on"
      - name: OPERATOR_CUSTOM_TLS_SECRET_NAME
        value: "object-store-operator-tls"
`

func chartDir(t testing.TB) string {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "helm", "object-store-operator")
}

func helm(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "helm"), append(args, "--kubeconfig", testCluster.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), out)
	return string(out)
}

func valuesFile(t testing.TB, content string) string {
	p := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestChartLintsAndRenders(t *testing.T) {
	out := helm(t, "lint", "--strict", chartDir(t))
	assert.Contains(t, out, "0 chart(s) failed")

	def := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator")
	for _, kind := range []string{"Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		assert.Contains(t, def, "kind: "+kind)
	}
	assert.Contains(t, def, "certificatesigningrequests/approval", "autocert by default needs the CSR rights")
	assert.Contains(t, def, `resourceNames: ["kubernetes.io/kubelet-serving"]`)
	assert.NotContains(t, def, "PodDisruptionBudget", "no PDB for one replica")

	seed := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "-f", valuesFile(t, seedValues))
	assert.Contains(t, seed, "- name: OPERATOR_AUTO_CERT_DISABLED\n              value: \"on\"")
	assert.Contains(t, seed, "- name: OPERATOR_CUSTOM_TLS_SECRET_NAME\n              value: object-store-operator-tls")
	assert.NotContains(t, seed, "certificatesigningrequests", "custom certificate mode gets no CSR rights")

	approveOff := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "-f", valuesFile(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_AUTOCERT_APPROVE
        value: "off"
`))
	assert.Contains(t, approveOff, "resources: [certificatesigningrequests]", "the CSR is still filed and watched")
	assert.NotContains(t, approveOff, "certificatesigningrequests/approval", "no self-approval rights when an admin approves")
	assert.NotContains(t, approveOff, "[approve]")

	withVAP := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
	assert.Contains(t, withVAP, "kind: ValidatingAdmissionPolicy\n", "the admission policy, where the API is served")
	assert.Contains(t, withVAP, "kind: ValidatingAdmissionPolicyBinding")
	assert.NotContains(t, def, "ValidatingAdmissionPolicy", "not where it is not")
	off := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"--set", "admissionPolicy.enabled=false")
	assert.NotContains(t, off, "ValidatingAdmissionPolicy", "admissionPolicy.enabled=false")

	ha := helm(t, "template", "osop", chartDir(t), "--set", "replicas=3")
	assert.Contains(t, ha, "kind: PodDisruptionBudget")
	assert.Contains(t, ha, "topologySpreadConstraints")
}

// deploymentEnv is the env the installed Deployment gives the operator,
// with the downward API resolved; only the addresses and the store path are
// moved to what this machine has free.
func deploymentEnv(t *testing.T, ns, updateDir string) []string {
	t.Helper()
	d, err := adminClient(t).AppsV1().Deployments(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err)
	var env []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+ns)
		case e.ValueFrom != nil:
			t.Fatalf("env %s: valueFrom not supported by the test", e.Name)
		case e.Name == "OPERATOR_UPGRADE_ADDRESS" || e.Name == "OPERATOR_METRICS_ADDRESS":
			// launchOperator picks free loopback ports.
		case e.Name == "OPERATOR_UPDATE_DIR":
			env = append(env, e.Name+"="+updateDir)
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

// asChartServiceAccount runs the operator as the chart's ServiceAccount,
// the way the pod would (a token instead of the mounted one).
func asChartServiceAccount(t *testing.T, ns string) (string, kubernetes.Interface) {
	t.Helper()
	path, cfg, err := testCluster.ServiceAccountKubeconfig(t.Context(), ns, "object-store-operator")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return path, cs
}

func TestChartInstallsAndItsRBACIsEnoughAndNoMore(t *testing.T) {
	ensureCRD(t)
	ns := "objectstore-operator-" + strings.ToLower(t.Name()[len(t.Name())-6:])
	// The namespace enforces Pod Security "restricted", as hardened
	// clusters label operator namespaces.
	_, err := adminClient(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	notes := helm(t, "install", "osop", chartDir(t), "-n", ns)
	assert.Contains(t, notes, "TLS: autocert", "NOTES.txt says which TLS mode is on")
	assert.Contains(t, notes, `grep -i "custom certificate\|TLS"`, "the AIStor troubleshooting steps' log check")
	assert.Contains(t, notes, "curl -v https://object-store-operator."+ns+".svc.cluster.local:4221/webhook/v1/update")
	t.Cleanup(func() {
		_ = adminClient(t).CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
	})
	kubeconfig, sa := asChartServiceAccount(t, ns)
	_, err = adminClient(t).AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(t.Context(), "object-store-operator-"+ns, metav1.GetOptions{})
	require.NoError(t, err, "the chart installs its admission policy: everything below runs under it")

	// No kubelet runs here, so no pod is made from the Deployment: admit its
	// pod template as a Pod (dry run) to see Pod Security accept it.
	dep, err := adminClient(t).AppsV1().Deployments(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = adminClient(t).CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-security-check-"}, Spec: dep.Spec.Template.Spec,
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "the chart's pod passes Pod Security restricted")

	// Autocert under the chart's identity.
	env := append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig)
	csrs := recordCSRs(t, ns)
	op := startOperator(t, env)
	_, err = servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err, "kubelet-serving certificate obtained with the chart's RBAC")
	assert.Equal(t, 1, csrs.filed())
	waitNoCSRLeft(t, ns)
	assert.NotContains(t, op.logs.String(), "forbidden")

	// The mount-secret flow under the same identity.
	tenantNS := operatorNamespace(t)
	keyPairSecret(t, tenantNS, "tenant-a-tls", true)
	statefulSet(t, tenantNS, "tenant-a")
	applyYAML(t, objectStoreYAML(tenantNS, "tenant-a", []string{"tenant-a-tls"}, nil, nil))
	require.Eventually(t, func() bool {
		_, err := generated(t, tenantNS, "tenant-a")
		return err == nil && restartValue(t, tenantNS, "tenant-a") != ""
	}, 10*time.Second, 20*time.Millisecond, "generated Secret and restart annotation written with the chart's RBAC")
	require.Eventually(t, func() bool { return condition(t, tenantNS, "tenant-a").Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)

	// Filling the store from an image, with a pull Secret and a registry
	// CA trusted through aistor-ca-tls*, under the same identity.
	reg := startRegistry(t)
	trustCA(t, ns, "aistor-ca-tls-registry", reg.caPEM)
	dockerConfigSecret(t, tenantNS, "regcred", reg.host, reg.user, reg.pass)
	tenantB := &binEnv{tenantNS: tenantNS}
	tenantB.objectStore(t, "tenant-b", reg.pushImage(t, "minio/aistor:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release}), "regcred")
	tenantB.waitBinaryCondition(t, "tenant-b", metav1.ConditionTrue, "Available")

	// What it must not do.
	err = sa.CoreV1().Secrets(tenantNS).Delete(t.Context(), "tenant-a-tls", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting a tenant's Secret must be forbidden, got %v", err)
	_, err = sa.CoreV1().ConfigMaps("kube-system").List(t.Context(), metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "reading ConfigMaps elsewhere must be forbidden, got %v", err)
	// Pods and Nodes are listed and watched for the platform of tenants'
	// binaries (RBAC cannot narrow a list to a label); nothing more.
	_, err = sa.CoreV1().Pods(tenantNS).List(t.Context(), metav1.ListOptions{LabelSelector: "statefulset.kubernetes.io/pod-name"})
	assert.NoError(t, err, "listing StatefulSet pods is granted")
	err = sa.CoreV1().Pods(tenantNS).Delete(t.Context(), "any", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting pods must be forbidden, got %v", err)
	_, err = sa.CoreV1().Pods(tenantNS).GetLogs("any", &corev1.PodLogOptions{}).DoRaw(t.Context())
	assert.True(t, apierrors.IsForbidden(err), "reading pods' logs must be forbidden, got %v", err)
	_, err = sa.CoreV1().Nodes().Update(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "any"}}, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "changing Nodes must be forbidden, got %v", err)
	op.stop()

	// As the AIStor documentation does it: switch to a custom certificate
	// through extraEnv.
	now := time.Now()
	certPEM, keyPEM, serial := testutil.KeyPair(t, nil, serviceDNSNames(ns), now.Add(-time.Hour), now.Add(time.Hour))
	_, err = adminClient(t).CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "object-store-operator-tls-custom"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	notes = helm(t, "upgrade", "osop", chartDir(t), "-n", ns, "-f",
		valuesFile(t, strings.ReplaceAll(seedValues, `"object-store-operator-tls"`, `"object-store-operator-tls-custom"`)))
	assert.Contains(t, notes, "custom certificate from Secret object-store-operator-tls-custom")
	custom := startOperator(t, append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig))
	waitServed(t, custom, ns, serial)
	custom.waitLog(t, "TLS custom certificate loaded")
	_, err = sa.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: []byte("x"), SignerName: certificatesv1.KubeletServingSignerName},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "without autocert the chart grants no CSR rights, got %v", err)
}
