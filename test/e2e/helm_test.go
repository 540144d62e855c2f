package e2e

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/autocert"
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
	out, err := runHelm(t, args...)
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), out)
	return out
}

// runHelm runs the pinned helm against the test cluster. helm template
// renders for the test apiserver's version: bin/helm is built without
// Helm's version ldflags, so by default it would render for Kubernetes
// 1.20, which the chart's kubeVersion refuses.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	args = append(args, "--kubeconfig", testCluster.Kubeconfig)
	if len(args) > 0 && args[0] == "template" {
		v, err := adminClient(t).Discovery().ServerVersion()
		require.NoError(t, err)
		args = append(args, "--kube-version", v.GitVersion)
	}
	cmd := exec.Command(filepath.Join(bin, "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
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
	assert.Contains(t, def, `resourceNames: ["kubernetes.io/kubelet-serving","beta.eks.amazonaws.com/app-serving"]`,
		"approve for both signers the operator may pick: it detects EKS at run time")
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
	assert.Contains(t, def, "kind: ValidatingAdmissionPolicy\n", "a plain helm template keeps the policy (Helm's own API list names no kinds)")
	out, err := runHelm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration")
	require.Error(t, err, "a cluster that lists its kinds and not the policy's")
	assert.Contains(t, out, "admissionPolicy.enabled: the cluster does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy")
	off := helm(t, "template", "osop", chartDir(t), "-n", "objectstore-operator", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"--set", "admissionPolicy.enabled=false")
	assert.NotContains(t, off, "ValidatingAdmissionPolicy", "admissionPolicy.enabled=false")

	ha := helm(t, "template", "osop", chartDir(t), "--set", "replicas=3")
	assert.Contains(t, ha, "kind: PodDisruptionBudget")
	assert.Contains(t, ha, "topologySpreadConstraints")

	// The schema refuses a wrong type before anything reaches the cluster,
	// naming the value.
	bad := valuesFile(t, "replicas: \"two\"\n")
	out, err = runHelm(t, "lint", "--strict", chartDir(t), "-f", bad)
	require.Error(t, err, "helm lint --strict accepted replicas: \"two\"")
	assert.Contains(t, out, "at '/replicas': got string, want integer")
	ns := operatorNamespace(t)
	out, err = runHelm(t, "install", "osop", chartDir(t), "-n", ns, "-f", bad)
	require.Error(t, err, "helm install accepted replicas: \"two\"")
	assert.Contains(t, out, "at '/replicas': got string, want integer")
	_, err = adminClient(t).AppsV1().Deployments(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing installed, got %v", err)
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
	assert.Contains(t, notes, "curl -v --cacert /tmp/certs/CAs/operator.crt https://object-store-operator."+ns+".svc.cluster.local:4221/webhook/v1/update",
		"the pod trusts the upgrade server through the CA the operator puts in <name>-generated")
	t.Cleanup(func() {
		_ = adminClient(t).CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{})
		forgetClaim(t, ns)
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
	require.NoError(t, err, "the chart's pod (preStop sleep included) passes Pod Security restricted")

	// Autocert under the chart's identity.
	env := append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig)
	csrs := recordCSRs(t, ns)
	op := startOperator(t, env)
	_, err = servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err, "kubelet-serving certificate obtained with the chart's RBAC")
	csrs.assertFiled(t, 1)
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
	// The rollout deletes pods a StatefulSet controls, one at a time
	// (docs/restarts.md); the admission policy refuses any other delete.
	_, err = adminClient(t).CoreV1().Pods(tenantNS).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"statefulset.kubernetes.io/pod-name": "bare"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = sa.CoreV1().Pods(tenantNS).Delete(t.Context(), "bare", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "deleting a pod no StatefulSet controls must be refused, got %v", err)
	assert.Contains(t, fmt.Sprint(err), "deletes only pods a StatefulSet controls")
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

// The opt-in NetworkPolicy, PodMonitor and ServiceMonitor are admitted by
// the apiserver (the Prometheus Operator's CRDs applied first), and the
// notes follow the cluster domain, the Secret name and the TLS mode.
func TestChartNetworkPolicyMonitorsAndNotesAreAdmitted(t *testing.T) {
	ensureCRD(t)
	ensureMonitoringCRDs(t)
	ns, tenant := operatorNamespace(t), operatorNamespace(t)
	notes := helm(t, "install", "osop", chartDir(t), "-n", ns, "-f", valuesFile(t, fmt.Sprintf(`watchNamespaces: [%s]
networkPolicy:
  enabled: true
podMonitor:
  enabled: true
  labels: {release: prometheus}
global:
  operator:
    extraEnv:
      - {name: CLUSTER_DOMAIN, value: corp.example}
      - {name: OPERATOR_AUTOCERT_SECRET_NAME, value: osop-serving}
`, tenant)))

	np, err := adminClient(t).NetworkingV1().NetworkPolicies(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err, "the NetworkPolicy is admitted")
	require.Len(t, np.Spec.Ingress, 2)
	assert.Equal(t, int32(4221), np.Spec.Ingress[0].Ports[0].Port.IntVal)
	assert.Equal(t, []string{tenant}, np.Spec.Ingress[0].From[0].NamespaceSelector.MatchExpressions[0].Values, "4221 from the watched namespace")
	assert.Equal(t, int32(8080), np.Spec.Ingress[1].Ports[0].Port.IntVal)
	dep, err := adminClient(t).AppsV1().Deployments(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, np.Spec.PodSelector.MatchLabels, dep.Spec.Selector.MatchLabels, "the policy selects the operator's pods")

	podMonitors := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}
	serviceMonitors := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	pm, err := dyn(t).Resource(podMonitors).Namespace(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err, "the PodMonitor is admitted")
	assert.Equal(t, "prometheus", pm.GetLabels()["release"])
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	require.Len(t, endpoints, 1)
	assert.Equal(t, "metrics", endpoints[0].(map[string]any)["port"], "the container port's name")

	assert.Contains(t, notes, "https://object-store-operator."+ns+".svc.corp.example:4221/webhook/v1/update")
	assert.NotContains(t, notes, "cluster.local")
	assert.Contains(t, notes, "Secret\n"+ns+"/osop-serving")
	assert.Contains(t, notes, "--cacert /tmp/certs/CAs/operator.crt https://")

	// Plain HTTP (AIStor's documented mode without a Secret): the notes
	// say http, after the warning too; the ServiceMonitor instead of the
	// PodMonitor.
	notes = helm(t, "upgrade", "osop", chartDir(t), "-n", ns, "-f", valuesFile(t, fmt.Sprintf(`watchNamespaces: [%s]
serviceMonitor:
  enabled: true
global:
  operator:
    extraEnv:
      - {name: OPERATOR_AUTO_CERT_DISABLED, value: "on"}
`, tenant)))
	assert.Contains(t, notes, "WARNING: autocert is disabled")
	assert.Contains(t, notes, "curl -v http://object-store-operator."+ns+".svc.cluster.local:4221/webhook/v1/update")
	assert.NotContains(t, notes, "https://", "no https anywhere in plain-HTTP mode")
	assert.NotContains(t, notes, "--cacert")
	_, err = dyn(t).Resource(serviceMonitors).Namespace(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err, "the ServiceMonitor is admitted")
	_, err = dyn(t).Resource(podMonitors).Namespace(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the PodMonitor is gone, got %v", err)
	_, err = adminClient(t).NetworkingV1().NetworkPolicies(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the NetworkPolicy is opt-in, got %v", err)
}

// On EKS the operator files its CSR with EKS's signer (it detects EKS from
// the nodes); the chart's RBAC must let it approve for that signer too,
// without the chart deciding which signer applies.
func TestChartRBACApprovesTheEKSSignerTheOperatorDetects(t *testing.T) {
	ensureCRD(t)
	ns := operatorNamespace(t)
	// DetectSigner reads the first few Nodes: this name sorts first.
	node := "aaa-eks-" + ns
	_, err := adminClient(t).CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"kubernetes.io/os": "linux", "eks.amazonaws.com/nodegroup": "ng-1", labelGroup: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = adminClient(t).CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	t.Cleanup(func() {
		_ = adminClient(t).CertificatesV1().CertificateSigningRequests().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: autocert.NamespaceLabel + "=" + ns})
	})

	helm(t, "install", "osop", chartDir(t), "-n", ns)
	kubeconfig, _ := asChartServiceAccount(t, ns)
	// Not ready until a certificate is served, which never comes here.
	op := launchOperator(t, append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig))
	defer op.stop()

	// Nothing here signs for EKS's signer: the CSR stays approved and
	// unsigned, which is all the chart's part.
	var approved *certificatesv1.CertificateSigningRequest
	require.Eventually(t, func() bool {
		for _, c := range operatorCSRs(t, ns) {
			for _, cond := range c.Status.Conditions {
				if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
					approved = &c
					return true
				}
			}
		}
		return false
	}, 15*time.Second, 20*time.Millisecond, "the operator approves its CSR with the chart's RBAC")
	assert.Equal(t, autocert.EKSSigner, approved.Spec.SignerName)
}

// filesModeValues is docs/install.md's example: the certificate from a
// Secret mounted through extraVolumes, served in the files mode.
const filesModeValues = `extraVolumes:
  - name: serving-cert
    secret:
      secretName: object-store-operator-files-tls   # tls.crt, tls.key
extraVolumeMounts:
  - name: serving-cert
    mountPath: /tmp/k8s-webhook-server/serving-certs
    readOnly: true
global:
  operator:
    extraEnv:
      - name: OPERATOR_TLS_CERT_FILE
        value: /tmp/k8s-webhook-server/serving-certs/tls.crt
      - name: OPERATOR_TLS_KEY_FILE
        value: /tmp/k8s-webhook-server/serving-certs/tls.key
`

// The files mode works through the chart: the documented extraVolumes
// example is admitted under Pod Security restricted, and the operator,
// with the Deployment's environment and the chart's ServiceAccount, serves
// the mounted certificate without any CSR right.
func TestChartServesAFilesModeCertificateFromExtraVolumes(t *testing.T) {
	ensureCRD(t)
	ns := operatorNamespace(t)
	_, err := adminClient(t).CoreV1().Namespaces().Patch(t.Context(), ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	notes := helm(t, "install", "osop", chartDir(t), "-n", ns, "-f", valuesFile(t, filesModeValues))
	assert.Contains(t, notes, "TLS: the certificate in /tmp/k8s-webhook-server/serving-certs/tls.crt")
	assert.Contains(t, notes, "--cacert /tmp/certs/CAs/operator.crt https://")

	dep, err := adminClient(t).AppsV1().Deployments(ns).Get(t.Context(), "object-store-operator", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = adminClient(t).CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-security-check-"}, Spec: dep.Spec.Template.Spec,
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "the pod with the certificate volume passes Pod Security restricted")

	// What the kubelet would mount, in a directory of this machine.
	dir := t.TempDir()
	now := time.Now()
	certPEM, keyPEM, serial := testutil.KeyPair(t, nil, serviceDNSNames(ns), now.Add(-time.Hour), now.Add(time.Hour))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600))
	env := deploymentEnv(t, ns, t.TempDir())
	for i, e := range env {
		env[i] = strings.Replace(e, "=/tmp/k8s-webhook-server/serving-certs", "="+dir, 1)
	}
	kubeconfig, sa := asChartServiceAccount(t, ns)
	op := startOperator(t, append(env, "KUBECONFIG="+kubeconfig))
	waitServed(t, op, ns, serial)

	_, err = sa.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the files mode gets no CSR rights, got %v", err)
}
