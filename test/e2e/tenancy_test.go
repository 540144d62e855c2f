package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// renderedObjects parses helm template's output.
func renderedObjects(t *testing.T, out string) []unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []unstructured.Unstructured
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		if raw != nil {
			objs = append(objs, unstructured.Unstructured{Object: raw})
		}
	}
}

// namespaceRules are a rendering's Role rules by namespace, and its
// ClusterRoles' rules under "".
func namespaceRules(t *testing.T, objs []unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			rules[""] = append(rules[""], r.Rules...)
		case "Role":
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			rules[r.Namespace] = append(rules[r.Namespace], r.Rules...)
		}
	}
	return rules
}

// grants reports whether rules allow verb on group/resource (any name).
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// canI asks the apiserver whether user may do verb on resource in ns ("":
// in every namespace), as kubectl auth can-i --as does.
func canI(t *testing.T, user, verb, resource, ns string) bool {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	args := []string{"--kubeconfig", testCluster.Kubeconfig, "auth", "can-i", verb, "--as", user}
	if res, sub, ok := strings.Cut(resource, "/"); ok {
		// objectstores/status.aistor.min.io: the group follows the subresource.
		sub, group, _ := strings.Cut(sub, ".")
		args = append(args, res+"."+group, "--subresource", sub)
	} else {
		args = append(args, resource)
	}
	if ns == "" {
		args = append(args, "--all-namespaces")
	} else {
		args = append(args, "-n", ns)
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl"), args...).Output()
	answer := strings.TrimSpace(string(out))
	var exit *exec.ExitError
	require.True(t, err == nil || errors.As(err, &exit), "kubectl auth can-i: %v", err)
	require.Contains(t, []string{"yes", "no"}, answer, "kubectl auth can-i %s %s", verb, resource)
	return answer == "yes"
}

// kubectlAs runs kubectl impersonating user, with stdin; it returns the
// combined output and whether kubectl succeeded.
func kubectlAs(t *testing.T, user, stdin string, args ...string) (string, error) {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", testCluster.Kubeconfig, "--as", user}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// impersonating is the admin's client acting as user, as kubectl --as.
func impersonating(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(testCluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func serviceAccountUser(ns string) string {
	return "system:serviceaccount:" + ns + ":object-store-operator"
}

// tenantWrites are what the operator writes in tenant namespaces: with
// watchNamespaces, none of them may be granted cluster-wide.
var tenantWrites = []struct{ group, resource, verb string }{
	{"", "secrets", "create"}, {"", "secrets", "update"}, {"apps", "statefulsets", "patch"},
	{"aistor.min.io", "objectstores/status", "patch"}, {"", "events", "create"},
}

func TestChartWithWatchNamespacesGrantsNoClusterWideTenantWrites(t *testing.T) {
	ensureCRD(t)
	opNS, tenantA, tenantB, other := operatorNamespace(t), operatorNamespace(t), operatorNamespace(t), operatorNamespace(t)
	set := fmt.Sprintf("watchNamespaces={%s,%s}", tenantA, tenantB)

	rules := namespaceRules(t, renderedObjects(t, helm(t, "template", "osop", chartDir(t), "-n", opNS, "--set", set)))
	for _, w := range tenantWrites {
		assert.False(t, grants(rules[""], w.group, w.resource, w.verb), "a ClusterRole grants %s on %s/%s", w.verb, w.group, w.resource)
		for _, ns := range []string{tenantA, tenantB} {
			assert.True(t, grants(rules[ns], w.group, w.resource, w.verb), "the Role in %s lacks %s on %s/%s", ns, w.verb, w.group, w.resource)
		}
		assert.Empty(t, rules[other], "no Role outside the watched namespaces")
	}
	assert.True(t, grants(rules[opNS], "coordination.k8s.io", "leases", "create"), "leader election stays in the operator namespace")

	// The operator's scope and the RBAC follow one value.
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(bin, "helm"), "template", "osop", chartDir(t), "-n", opNS, "--kube-version", "v1.36.0", "-f", valuesFile(t, `global:
  operator:
    extraEnv:
      - name: OPERATOR_WATCH_NAMESPACES
        value: elsewhere
`)).CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "set watchNamespaces, not OPERATOR_WATCH_NAMESPACES")

	notes := helm(t, "install", "osop", chartDir(t), "-n", opNS, "--set", set)
	assert.Contains(t, notes, "Scope: ObjectStores in "+strings.Join(sortedPair(tenantA, tenantB), ",")+" only")
	sa := serviceAccountUser(opNS)
	for _, w := range tenantWrites {
		res := w.resource
		if w.group != "" {
			res += "." + w.group
		}
		assert.False(t, canI(t, sa, w.verb, res, ""), "%s %s in every namespace", w.verb, res)
		assert.False(t, canI(t, sa, w.verb, res, other), "%s %s in an unwatched namespace", w.verb, res)
		assert.True(t, canI(t, sa, w.verb, res, tenantA), "%s %s in a watched namespace", w.verb, res)
		assert.True(t, canI(t, sa, w.verb, res, tenantB), "%s %s in a watched namespace", w.verb, res)
	}
	assert.False(t, canI(t, sa, "list", "secrets", ""), "no cluster-wide Secret listing either")
	assert.False(t, canI(t, sa, "list", "statefulsets.apps", other))
	assert.True(t, canI(t, sa, "create", "certificatesigningrequests.certificates.k8s.io", ""), "CSRs stay cluster-wide")
}

func sortedPair(a, b string) []string {
	if a > b {
		return []string{b, a}
	}
	return []string{a, b}
}

// install is one Helm release of the chart with its operator running
// under the release's ServiceAccount.
type install struct {
	ns string
	op *operator
}

func installChart(t *testing.T, ns string, watch ...string) {
	t.Helper()
	args := []string{"install", "osop", chartDir(t), "-n", ns}
	if len(watch) > 0 {
		args = append(args, "--set", "watchNamespaces={"+strings.Join(watch, ",")+"}")
	}
	helm(t, args...)
}

// runInstall starts the operator of the release in ns, as its pod would
// run, without waiting for it to be ready.
func runInstall(t *testing.T, ns string) *install {
	t.Helper()
	kubeconfig, _ := asChartServiceAccount(t, ns)
	return &install{ns: ns, op: launchOperator(t, append(deploymentEnv(t, ns, t.TempDir()), "KUBECONFIG="+kubeconfig))}
}

// tenantStore creates an ObjectStore with a certificate and a StatefulSet
// in ns.
func tenantStore(t *testing.T, ns, name string) {
	t.Helper()
	keyPairSecret(t, ns, name+"-tls", true)
	statefulSet(t, ns, name)
	applyYAML(t, objectStoreYAML(ns, name, []string{name + "-tls"}, nil, nil))
}

func waitGenerated(t *testing.T, ns, store string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := generated(t, ns, store)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "%s/%s-generated", ns, store)
}

func TestTwoInstallsSideBySideAndAnOverlappingOneIsRefused(t *testing.T) {
	ensureCRD(t)
	opA, opB, opC := operatorNamespace(t), operatorNamespace(t), operatorNamespace(t)
	tenantA, tenantB, tenantX := operatorNamespace(t), operatorNamespace(t), operatorNamespace(t)
	installChart(t, opA, tenantA)
	installChart(t, opB, tenantB)
	started := time.Now()
	a, b := runInstall(t, opA), runInstall(t, opB)
	a.op.waitReady(t)
	b.op.waitReady(t)
	t.Logf("two installs ready %s after their start", time.Since(started).Round(10*time.Millisecond))

	tenantStore(t, tenantA, "store-a")
	tenantStore(t, tenantB, "store-b")
	waitGenerated(t, tenantA, "store-a")
	waitGenerated(t, tenantB, "store-b")
	require.Eventually(t, func() bool { return condition(t, tenantA, "store-a").Status == metav1.ConditionTrue }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return condition(t, tenantB, "store-b").Status == metav1.ConditionTrue }, 10*time.Second, 50*time.Millisecond)
	// Each rebuilt exactly its own tenant's Secret: neither saw the other's.
	assert.Equal(t, 1.0, metricValue(t, a.op, "objectstore_operator_mountsecret_rebuilds_total"))
	assert.Equal(t, 1.0, metricValue(t, b.op, "objectstore_operator_mountsecret_rebuilds_total"))
	// A rotated certificate is rewritten into the generated Secret under the
	// Role and the admission policy.
	keyPairSecret(t, tenantA, "store-a-tls", true)
	rotated, err := adminClient(t).CoreV1().Secrets(tenantA).Get(t.Context(), "store-a-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gen, err := generated(t, tenantA, "store-a")
		return err == nil && string(gen.Data["public.crt"]) == string(rotated.Data["tls.crt"])
	}, 20*time.Second, 50*time.Millisecond, "the generated Secret follows the rotation")
	// Counted once the StatefulSets are rolled too, a moment after the write.
	assert.Eventually(t, func() bool { return metricValue(t, a.op, "objectstore_operator_mountsecret_rebuilds_total") == 2.0 },
		10*time.Second, 50*time.Millisecond, "A rebuilt the rotated Secret once")
	assert.Equal(t, 1.0, metricValue(t, b.op, "objectstore_operator_mountsecret_rebuilds_total"))

	// A third install whose namespaces overlap A's is refused: not ready,
	// saying which install holds which namespace, and writes nothing.
	installChart(t, opC, tenantA, tenantX)
	tenantStore(t, tenantX, "store-x")
	c := runInstall(t, opC)
	var body string
	require.Eventually(t, func() bool {
		var ok bool
		ok, body = c.op.readyz()
		return !ok && strings.Contains(body, "namespace-claim: refused")
	}, 20*time.Second, 50*time.Millisecond, "the overlapping install reports why it is not ready")
	assert.Contains(t, body, opA+"/object-store-operator", "names the install that holds the namespace")
	assert.Contains(t, body, tenantA, "names the namespace both claim")
	assert.NotContains(t, body, opB, "B overlaps nothing of C's")
	_, err = generated(t, tenantX, "store-x")
	assert.Error(t, err, "the refused install wrote nothing")

	// A goes away (helm uninstall removes its claim): C takes over its
	// namespaces and reconciles them.
	a.op.stop()
	stopped := time.Now()
	helm(t, "uninstall", "osop", "-n", opA)
	c.op.waitReady(t)
	t.Logf("the refused install took over %s after the other was uninstalled", time.Since(stopped).Round(10*time.Millisecond))
	waitGenerated(t, tenantX, "store-x")
	assert.Equal(t, 1.0, metricValue(t, b.op, "objectstore_operator_mountsecret_rebuilds_total"), "B never touched C's tenants")

	// A cluster-wide install overlaps every other one: refused too.
	wide := operatorNamespace(t)
	installChart(t, wide)
	w := runInstall(t, wide)
	require.Eventually(t, func() bool {
		ok, body := w.op.readyz()
		return !ok && strings.Contains(body, "namespace-claim: refused") && strings.Contains(body, opB+"/object-store-operator")
	}, 20*time.Second, 50*time.Millisecond, "a cluster-wide install next to others is refused")
	assert.True(t, b.op.ready() && c.op.ready(), "the installs that were there first keep running")
}

func TestAdmissionPolicyHoldsTheOperatorToItsWrites(t *testing.T) {
	ensureCRD(t)
	opNS, tenantNS := operatorNamespace(t), operatorNamespace(t)
	helm(t, "install", "osop", chartDir(t), "-n", opNS)
	sa := serviceAccountUser(opNS)
	waitForAdmissionPolicy(t, sa, tenantNS)

	applyYAML(t, objectStoreYAML(tenantNS, "store", []string{"store-tls"}, nil, nil))
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(tenantNS).Get(t.Context(), "store", metav1.GetOptions{})
	require.NoError(t, err)
	keyPairSecret(t, tenantNS, "store-tls", true)
	labels := map[string]string{"app": "store"}
	for _, s := range []struct {
		name     string
		labelled bool
	}{{"store-pool-0", true}, {"unrelated", false}} {
		meta := metav1.ObjectMeta{Name: s.name}
		if s.labelled {
			meta.Labels = map[string]string{apiv1.ObjectStoreLabel: "store"}
		}
		_, err := adminClient(t).AppsV1().StatefulSets(tenantNS).Create(t.Context(), &appsv1.StatefulSet{
			ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{
						{Name: "minio", Image: "minio:old"}, {Name: "sidecar", Image: "sidecar:1"},
					}},
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// What the operator does is admitted. kubectl patch reads the object
	// first, which the operator never does (no get on StatefulSets), so
	// patches go through client-go impersonating the ServiceAccount:
	// the same request the operator sends, under the same user.
	asSA := impersonating(t, sa)
	patchSet := func(name, p string) error {
		_, err := asSA.AppsV1().StatefulSets(tenantNS).Patch(t.Context(), name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	ownerRef := fmt.Sprintf(`  ownerReferences:
  - apiVersion: aistor.min.io/v1
    kind: ObjectStore
    name: store
    uid: %s
    controller: true
    blockOwnerDeletion: true
`, u.GetUID())
	secretYAML := func(name string, owned bool) string {
		y := `apiVersion: v1
kind: Secret
metadata:
  name: ` + name + `
  namespace: ` + tenantNS + `
  labels:
    aistor.min.io/objectstore: store
`
		if owned {
			y += ownerRef
		}
		return y + "data:\n  public.crt: eA==\n"
	}
	generatedYAML := secretYAML("store-generated", true)
	for _, a := range []struct {
		what, stdin string
		args        []string
	}{
		{"create the generated Secret", generatedYAML, []string{"create", "-f", "-"}},
		{"rewrite the generated Secret", strings.Replace(generatedYAML, "eA==", "eQ==", 1), []string{"replace", "-f", "-"}},
		{"store its own TLS Secret", `apiVersion: v1
kind: Secret
metadata:
  name: object-store-operator-tls
  namespace: ` + opNS + `
  labels:
    app.kubernetes.io/managed-by: object-store-operator
type: kubernetes.io/tls
data:
  tls.crt: eA==
  tls.key: eA==
`, []string{"create", "-f", "-", "--dry-run=server"}},
	} {
		out, err := kubectlAs(t, sa, a.stdin, a.args...)
		assert.NoError(t, err, "%s: %s", a.what, out)
	}
	// The two patches the operator sends (updates/statefulsets.go,
	// mountsecret's rollStatefulSets).
	assert.NoError(t, patchSet("store-pool-0", `{"spec":{"template":{"spec":{"containers":[{"name":"minio","image":"minio:new"}]}}}}`), "set the minio image")
	assert.NoError(t, patchSet("store-pool-0", `{"spec":{"template":{"metadata":{"annotations":{"aistor.min.io/certs-restart":"abc"}}}}}`), "roll the pods")

	// What it does not do is denied by the policy, although RBAC allows it.
	tlsSecret, err := adminClient(t).CoreV1().Secrets(tenantNS).Get(t.Context(), "store-tls", metav1.GetOptions{})
	require.NoError(t, err)
	hijack := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: store-tls
  namespace: %s
  resourceVersion: "%s"
  labels:
    aistor.min.io/objectstore: store
data:
  tls.crt: eA==
`, tenantNS, tlsSecret.ResourceVersion)
	// A Secret named and owned as a generated one but not labelled (not
	// the operator's) is not taken over by adding the label.
	applyYAML(t, objectStoreYAML(tenantNS, "solo", nil, nil, nil))
	solo, err := dyn(t).Resource(apiv1.Resource).Namespace(tenantNS).Get(t.Context(), "solo", metav1.GetOptions{})
	require.NoError(t, err)
	soloOwner := strings.NewReplacer("name: store", "name: solo", string(u.GetUID()), string(solo.GetUID())).Replace(ownerRef)
	notOurs := strings.Replace(strings.Replace(secretYAML("solo-generated", false), "  labels:\n    aistor.min.io/objectstore: store\n", "", 1),
		"\ndata:", "\n"+soloOwner+"data:", 1)
	applyYAML(t, notOurs)
	notOursSecret, err := adminClient(t).CoreV1().Secrets(tenantNS).Get(t.Context(), "solo-generated", metav1.GetOptions{})
	require.NoError(t, err)
	takeOver := strings.Replace(secretYAML("solo-generated", false), "\ndata:", "\n"+soloOwner+"data:", 1)
	takeOver = strings.Replace(takeOver, "metadata:\n", "metadata:\n  resourceVersion: \""+notOursSecret.ResourceVersion+"\"\n", 1)
	// Its NamespaceClaim is the chart's: the operator may write none, its
	// own included (RBAC, before any policy).
	claim := func(name, scope string) string {
		return `apiVersion: aistor.min.io/v1
kind: NamespaceClaim
metadata:
  name: ` + name + `
spec:
  install: object-store-operator
  namespaces: [` + scope + `]
`
	}
	for _, c := range []struct{ what, stdin string }{
		{"its own claim, as configured", claim(opNS+"-again", "")},
		{"a claim on namespaces the release does not watch", claim(tenantNS, tenantNS)},
	} {
		out, err := kubectlAs(t, sa, c.stdin, "create", "-f", "-", "--dry-run=server")
		if assert.Error(t, err, "%s must be denied: %s", c.what, out) {
			assert.Contains(t, out, "forbidden", "%s: denied by RBAC", c.what)
		}
	}
	out, err := kubectlAs(t, sa, "", "delete", "namespaceclaim", opNS, "--dry-run=server")
	if assert.Error(t, err, "deleting its own claim must be denied: %s", out) {
		assert.Contains(t, out, "forbidden")
	}

	for _, d := range []struct {
		what, stdin string
		args        []string
	}{
		{"a Secret it did not generate, labelled on the way", takeOver, []string{"replace", "-f", "-"}},
		{"an unlabelled Secret", "", []string{"create", "secret", "generic", "loose", "-n", tenantNS, "--from-literal=k=v"}},
		{"an unlabelled Secret in its own namespace", "", []string{"create", "secret", "generic", "loose", "-n", opNS, "--from-literal=k=v"}},
		{"a labelled Secret without an ObjectStore owner", secretYAML("other-generated", false), []string{"create", "-f", "-", "--dry-run=server"}},
		{"a tenant's Secret, labelled on the way", hijack, []string{"replace", "-f", "-"}},
	} {
		out, err := kubectlAs(t, sa, d.stdin, d.args...)
		t.Logf("%s: %s", d.what, strings.TrimSpace(out))
		if assert.Error(t, err, "%s must be denied: %s", d.what, out) {
			assert.Contains(t, out, "ValidatingAdmissionPolicy", "%s: denied by the policy, not RBAC", d.what)
		}
	}
	for _, d := range []struct{ what, name, patch string }{
		{"another container's image", "store-pool-0", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"evil:1"}]}}}}`},
		{"the replicas", "store-pool-0", `{"spec":{"replicas":5}}`},
		{"another pod-template annotation", "store-pool-0", `{"spec":{"template":{"metadata":{"annotations":{"other":"x"}}}}}`},
		{"the pod's service account", "store-pool-0", `{"spec":{"template":{"spec":{"serviceAccountName":"admin"}}}}`},
		{"the minio container's command", "store-pool-0", `{"spec":{"template":{"spec":{"containers":[{"name":"minio","command":["sh"]}]}}}}`},
		{"an added container", "store-pool-0", `{"spec":{"template":{"spec":{"containers":[{"name":"extra","image":"evil:1"}]}}}}`},
		{"the StatefulSet's labels", "store-pool-0", `{"metadata":{"labels":{"x":"y"}}}`},
		{"an unlabelled StatefulSet's minio image", "unrelated", `{"spec":{"template":{"spec":{"containers":[{"name":"minio","image":"minio:new"}]}}}}`},
	} {
		err := patchSet(d.name, d.patch)
		t.Logf("%s: %v", d.what, err)
		if assert.Error(t, err, "%s must be denied", d.what) {
			assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy", "%s: denied by the policy, not RBAC", d.what)
		}
	}
	s, err := adminClient(t).AppsV1().StatefulSets(tenantNS).Get(t.Context(), "store-pool-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "minio:new", s.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, "sidecar:1", s.Spec.Template.Spec.Containers[1].Image)
	assert.Equal(t, "abc", s.Spec.Template.Annotations["aistor.min.io/certs-restart"])

	// The admin is not bound by it.
	putNamedSecret(t, tenantNS, "admin-secret", map[string][]byte{"k": []byte("v")})
}

// waitForAdmissionPolicy waits until the apiserver enforces a freshly
// installed policy on the operator's ServiceAccount sa (it loads one
// within a moment): until it denies what it always denies, an unlabelled
// Secret in ns.
func waitForAdmissionPolicy(t *testing.T, sa, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, err := kubectlAs(t, sa, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: probe\n  namespace: "+ns+"\n",
			"create", "-f", "-", "--dry-run=server")
		return err != nil && strings.Contains(out, "ValidatingAdmissionPolicy")
	}, 20*time.Second, 100*time.Millisecond, "the admission policy is enforced")
}
