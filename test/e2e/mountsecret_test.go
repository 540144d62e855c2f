package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/mountsecret"
	"github.com/object-store-operator/operator/test/cluster"
)

var crdOnce sync.Once

// kubectl runs the pinned kubectl as the admin.
func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", testCluster.Kubeconfig}, args...)...).CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// ensureCRD applies the chart's CRD file, as users and make run do.
func ensureCRD(t testing.TB) {
	crdOnce.Do(func() {
		root, err := cluster.RepoRoot()
		require.NoError(t, err)
		kubectl(t, "apply", "-f", filepath.Join(root, "helm", "object-store-operator", "crds"))
		kubectl(t, "wait", "--for=condition=Established", "crd/objectstores.aistor.min.io", "crd/namespaceclaims.aistor.min.io", "--timeout=30s")
	})
}

func dyn(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(testCluster.Config)
	require.NoError(t, err)
	return d
}

// tenant is a tenant namespace with an ObjectStore, its Secrets and a
// StatefulSet, and the operator running.
type tenant struct {
	ns, store string
	op        *operator
}

func keyPairSecret(t *testing.T, ns, name string, withCA bool) {
	t.Helper()
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, []string{name + "." + ns + ".svc"}, now.Add(-time.Hour), now.Add(time.Hour))
	data := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}
	if withCA {
		data["ca.crt"] = certPEM
	}
	putNamedSecret(t, ns, name, data)
}

func putNamedSecret(t testing.TB, ns, name string, data map[string][]byte) {
	t.Helper()
	api := adminClient(t).CoreV1().Secrets(ns)
	s, err := api.Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	require.NoError(t, err)
	s.Data = data
	_, err = api.Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func objectStoreYAML(ns, name string, server, client, cas []string) string {
	refs := func(names []string) string {
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "\n      - name: %s", n)
		}
		return b.String()
	}
	return fmt.Sprintf(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata:
  name: %s
  namespace: %s
spec:
  image: quay.io/minio/aistor/minio:RELEASE.2025-04-08T15-41-24Z
  certificates:
    server:%s
    client:%s
    trustedCAs:%s
`, name, ns, refs(server), refs(client), refs(cas))
}

func applyYAML(t testing.TB, yaml string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "\"$KUBECTL\" --kubeconfig \"$KC\" apply -f -")
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	cmd.Env = append(cmd.Environ(), "KUBECTL="+filepath.Join(bin, "kubectl"), "KC="+testCluster.Kubeconfig)
	cmd.Stdin = strings.NewReader(yaml)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func statefulSet(t *testing.T, ns, store string) {
	t.Helper()
	tenantStatefulSet(t, ns, store, 1, "minio")
}

// runningPod returns the UID and restart annotation of the store's running
// pod (the StatefulSet has one replica), or "" while there is none.
func runningPod(t *testing.T, ns, store string) (types.UID, string) {
	t.Helper()
	pods, err := adminClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + apiv1.ObjectStoreLabelValue(store)})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p.UID, p.Annotations[mountsecret.RestartAnnotation]
		}
	}
	return "", ""
}

// waitRolloutEnd waits for the rollout of the store's first restart to
// end (its pods replaced, the StatefulSet released): an operator stopped
// in the middle of it leaves the next one to go on with it, which is work,
// not a needless write.
func waitRolloutEnd(t *testing.T, ns, store string) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := adminClient(t).AppsV1().StatefulSets(ns).Get(t.Context(), poolName(store), metav1.GetOptions{})
		_, held := s.Annotations[apiv1.RolloutAnnotation]
		return err == nil && !held
	}, 30*time.Second, 20*time.Millisecond, "the rollout ends")
}

// waitFirstRestart waits until the operator has restarted the pods of
// the new StatefulSets sets once for the certificates they mount (each
// template carries the restart annotation) and that rollout has ended: a
// test that counts restarts, or reads the update's condition, afterwards
// sees neither that rollout nor WaitingForPods. The ObjectStore's
// PodsCurrent condition cannot tell: it may still be True from
// StatefulSets before these.
func waitFirstRestart(t testing.TB, ns string, sets ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, name := range sets {
			s, err := adminClient(t).AppsV1().StatefulSets(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			if _, held := s.Annotations[apiv1.RolloutAnnotation]; held || s.Spec.Template.Annotations[mountsecret.RestartAnnotation] == "" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 20*time.Millisecond, "the first restart of StatefulSets %v ends", sets)
}

func restartValue(t *testing.T, ns, store string) string {
	t.Helper()
	s, err := adminClient(t).AppsV1().StatefulSets(ns).Get(t.Context(), poolName(store), metav1.GetOptions{})
	require.NoError(t, err)
	return s.Spec.Template.Annotations[mountsecret.RestartAnnotation]
}

func generated(t testing.TB, ns, store string) (*corev1.Secret, error) {
	return adminClient(t).CoreV1().Secrets(ns).Get(t.Context(), apiv1.GeneratedSecretName(store), metav1.GetOptions{})
}

func condition(t *testing.T, ns, store string) metav1.Condition {
	t.Helper()
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Get(t.Context(), store, metav1.GetOptions{})
	require.NoError(t, err)
	os, err := apiv1.FromUnstructured(u)
	require.NoError(t, err)
	for _, c := range os.Status.Conditions {
		if c.Type == apiv1.ConditionCertificatesReady {
			return c
		}
	}
	return metav1.Condition{}
}

func newTenant(t *testing.T, extraEnv ...string) *tenant {
	t.Helper()
	ensureCRD(t)
	opNS := operatorNamespace(t)
	ns := operatorNamespace(t)
	tn := &tenant{ns: ns, store: "tenant-a"}
	keyPairSecret(t, ns, "tenant-a-tls", true)
	keyPairSecret(t, ns, "tenant-a-extra-tls", false)
	keyPairSecret(t, ns, "tenant-a-client", false)
	ca, _, _ := testutil.KeyPair(t, nil, []string{"kms-ca"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	putNamedSecret(t, ns, "kms-ca", map[string][]byte{"ca.crt": ca})
	statefulSet(t, ns, tn.store)
	// The operator reconciles the tenant's namespace only: the tests that
	// use newTenant may run in parallel.
	tn.op = startOperator(t, k8sEnv(opNS, append([]string{"OPERATOR_WATCH_NAMESPACES=" + ns}, extraEnv...)...))
	applyYAML(t, objectStoreYAML(ns, tn.store, []string{"tenant-a-tls", "tenant-a-extra-tls"}, []string{"tenant-a-client"}, []string{"kms-ca"}))
	return tn
}

func TestMountSecretAssemblesEveryReferencedCertificate(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	var s *corev1.Secret
	require.Eventually(t, func() bool {
		var err error
		s, err = generated(t, tn.ns, tn.store)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)

	tls, err := adminClient(t).CoreV1().Secrets(tn.ns).Get(t.Context(), "tenant-a-tls", metav1.GetOptions{})
	require.NoError(t, err)
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{
		"public.crt", "private.key", "CAs.server.tenant-a-tls.crt",
		"tenant-a-extra-tls.public.crt", "tenant-a-extra-tls.private.key",
		"client.tenant-a-client.crt", "client.tenant-a-client.key",
		"CAs.trusted.kms-ca.crt", "CAs.operator.crt",
	}, keys)
	assert.Equal(t, tls.Data["tls.crt"], s.Data["public.crt"])
	assert.Equal(t, tls.Data["tls.key"], s.Data["private.key"])
	assert.NotEmpty(t, s.Annotations[mountsecret.HashAnnotation])
	ref := metav1.GetControllerOf(s)
	require.NotNil(t, ref)
	assert.Equal(t, apiv1.Kind, ref.Kind)
	assert.Equal(t, tn.store, ref.Name)

	require.Eventually(t, func() bool { return restartValue(t, tn.ns, tn.store) != "" }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return condition(t, tn.ns, tn.store).Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)
	out := kubectl(t, "get", "objectstore", tn.store, "-n", tn.ns, "-o", "wide")
	assert.Contains(t, out, "True", "kubectl shows the CertificatesReady column")
}

func TestMountSecretFollowsRotationDeletionAndHandEdits(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	require.Eventually(t, func() bool { return restartValue(t, tn.ns, tn.store) != "" }, 10*time.Second, 20*time.Millisecond)
	before := restartValue(t, tn.ns, tn.store)
	var podBefore types.UID
	require.Eventually(t, func() bool {
		uid, restart := runningPod(t, tn.ns, tn.store)
		podBefore = uid
		return uid != "" && restart == before
	}, 30*time.Second, 20*time.Millisecond, "the StatefulSet's pod runs")

	// Rotation: cert-manager writes a new certificate into the server Secret.
	start := time.Now()
	keyPairSecret(t, tn.ns, "tenant-a-tls", true)
	tls, err := adminClient(t).CoreV1().Secrets(tn.ns).Get(t.Context(), "tenant-a-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := generated(t, tn.ns, tn.store)
		return err == nil && string(s.Data["public.crt"]) == string(tls.Data["tls.crt"]) && restartValue(t, tn.ns, tn.store) != before
	}, 2*time.Second, 10*time.Millisecond, "generated Secret and pod template updated within 2 s")
	t.Logf("server Secret rotated -> generated Secret and StatefulSet updated in %s", time.Since(start).Round(time.Millisecond))
	// docs/troubleshooting.md: grep "mount secret rebuilt" says why; it is
	// logged after the rebuild's API writes.
	tn.op.waitDocumentedLine(t, "mount secret rebuilt", `"reason":"referenced content changed: tenant-a-tls"`)
	rotated := restartValue(t, tn.ns, tn.store)
	require.Eventually(t, func() bool {
		uid, restart := runningPod(t, tn.ns, tn.store)
		return uid != "" && uid != podBefore && restart == rotated
	}, 30*time.Second, 20*time.Millisecond, "the statefulset controller replaced the pod with one from the new template")

	// The seed's forced refresh.
	afterRotation := restartValue(t, tn.ns, tn.store)
	kubectl(t, "delete", "secret", apiv1.GeneratedSecretName(tn.store), "-n", tn.ns)
	require.Eventually(t, func() bool {
		_, err := generated(t, tn.ns, tn.store)
		return err == nil && restartValue(t, tn.ns, tn.store) != afterRotation
	}, 5*time.Second, 10*time.Millisecond, "recreated, and the pods restart")
	tn.op.waitDocumentedLine(t, "mount secret rebuilt", "deleted): created")

	// A hand edit is reverted.
	s, err := generated(t, tn.ns, tn.store)
	require.NoError(t, err)
	original := string(s.Data["public.crt"])
	kubectl(t, "patch", "secret", s.Name, "-n", tn.ns, "--type=merge", "-p", `{"data":{"public.crt":"aGFja2Vk"}}`)
	require.Eventually(t, func() bool {
		s, err := generated(t, tn.ns, tn.store)
		return err == nil && string(s.Data["public.crt"]) == original
	}, 5*time.Second, 10*time.Millisecond, "hand edit reverted")
	tn.op.waitDocumentedLine(t, "mount secret rebuilt", `"reason":"edited by hand: reverted"`)
	assert.Equal(t, 4.0, counter(t, tn.op, "objectstore_operator_mountsecret_rebuilds_total"), "created, rotated, recreated, reverted")
}

func TestMissingSecretWritesNothingAndIsReported(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	require.Eventually(t, func() bool { return condition(t, tn.ns, tn.store).Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)
	s, err := generated(t, tn.ns, tn.store)
	require.NoError(t, err)

	applyYAML(t, objectStoreYAML(tn.ns, tn.store, []string{"tenant-a-tls"}, nil, []string{"kms-ca", "missing-ca"}))
	require.Eventually(t, func() bool {
		c := condition(t, tn.ns, tn.store)
		return c.Status == metav1.ConditionFalse && c.Reason == "SecretNotFound"
	}, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, condition(t, tn.ns, tn.store).Message, "Secret missing-ca (named by spec.certificates.trustedCAs[1]): not found", "the Secret and the field that names it")
	require.Eventually(t, func() bool {
		return strings.Contains(kubectl(t, "describe", "objectstore", tn.store, "-n", tn.ns), "SecretNotFound")
	}, 10*time.Second, 50*time.Millisecond, "an Event on the ObjectStore")
	now, err := generated(t, tn.ns, tn.store)
	require.NoError(t, err)
	assert.Equal(t, s.ResourceVersion, now.ResourceVersion, "nothing written while a Secret is missing")

	ca, _, _ := testutil.KeyPair(t, nil, []string{"missing-ca"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	putNamedSecret(t, tn.ns, "missing-ca", map[string][]byte{"ca.crt": ca})
	require.Eventually(t, func() bool { return condition(t, tn.ns, tn.store).Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)
	fixed, err := generated(t, tn.ns, tn.store)
	require.NoError(t, err)
	assert.Contains(t, fixed.Data, "CAs.trusted.missing-ca.crt")

	putNamedSecret(t, tn.ns, "kms-ca", map[string][]byte{"ca.crt": []byte("garbage")})
	require.Eventually(t, func() bool { return condition(t, tn.ns, tn.store).Reason == "SecretMalformed" }, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, condition(t, tn.ns, tn.store).Message, "kms-ca")
}

func TestDeletingTheObjectStoreCollectsItsSecret(t *testing.T) {
	t.Parallel()
	tn := newTenant(t)
	require.Eventually(t, func() bool { _, err := generated(t, tn.ns, tn.store); return err == nil }, 10*time.Second, 20*time.Millisecond)
	kubectl(t, "delete", "objectstore", tn.store, "-n", tn.ns)
	require.Eventually(t, func() bool {
		_, err := generated(t, tn.ns, tn.store)
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "garbage-collected with its owner")
}

// writeCount reads the operator's own count of API writes.
func writeCount(t testing.TB, op *operator) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(string(get(t, http.DefaultClient, "http://"+op.metricsAddr+"/metrics")), "\n") {
		if strings.HasPrefix(l, "objectstore_operator_mountsecret_writes_total") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// apiserverWrites counts create/update/patch requests the apiserver served
// for the resources the controller writes.
func apiserverWrites(t *testing.T) map[string]float64 {
	t.Helper()
	raw, err := adminClient(t).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	out := map[string]float64{}
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "apiserver_request_total{") {
			continue
		}
		for _, res := range []string{`resource="secrets"`, `resource="statefulsets"`, `resource="objectstores"`} {
			if !strings.Contains(l, res) {
				continue
			}
			for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`} {
				if strings.Contains(l, verb) {
					var v float64
					_, err := fmt.Sscanf(l[strings.LastIndex(l, " ")+1:], "%g", &v)
					require.NoError(t, err)
					out[res+verb] += v
				}
			}
		}
	}
	return out
}

// quiesce waits until earlier tests' namespaces are gone, so that only
// this test's ObjectStore can cause writes: the operator watches the whole
// cluster, and a store whose namespace is being torn down really changes.
func quiesce(t *testing.T, ns string) {
	t.Helper()
	// Tearing down a namespace of StatefulSets, pods and MinIO tenants
	// takes the garbage collector a while on a loaded machine.
	var left string
	done := assert.Eventually(t, func() bool {
		stores, err := dyn(t).Resource(apiv1.Resource).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, s := range stores.Items {
			if s.GetNamespace() != ns {
				left = "ObjectStore " + s.GetNamespace() + "/" + s.GetName()
				return false
			}
		}
		nss, err := adminClient(t).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, n := range nss.Items {
			if n.Status.Phase == corev1.NamespaceTerminating {
				left = "namespace " + n.Name
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "earlier tests' namespaces still terminating")
	if !done {
		t.Fatalf("still there after 3 minutes: %s", left)
	}
}

func TestResyncAndUnrelatedChangesWriteNothing(t *testing.T) {
	quiesce(t, "")
	tn := newTenant(t, "OPERATOR_RESYNC_PERIOD=1s")
	quiesce(t, tn.ns)
	require.Eventually(t, func() bool { return condition(t, tn.ns, tn.store).Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return restartValue(t, tn.ns, tn.store) != "" }, 10*time.Second, 20*time.Millisecond)
	waitRolloutEnd(t, tn.ns, tn.store)
	// Every controller has synced the ObjectStore once (its start-up writes
	// are done); from there, over three resync periods
	// (OPERATOR_RESYNC_PERIOD=1s), nothing is written.
	waitSynced(t, tn.op, "mountsecret", "binsource", "updates")
	ww := watchWrites(t, tn.ns, true)
	before, opBefore := apiserverWrites(t), writeCount(t, tn.op)
	putNamedSecret(t, tn.ns, "unrelated", map[string][]byte{"x": []byte("y")}) // the test's one POST
	ww.quiet(t, 3500*time.Millisecond, "resyncs and an unrelated Secret write nothing to the tenant")
	after, opAfter := apiserverWrites(t), writeCount(t, tn.op)
	diff := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			diff[k] = d
		}
	}
	b, _ := json.Marshal(diff)
	assert.Equal(t, map[string]float64{`resource="secrets"verb="POST"`: 1}, diff, "only the test's own write: %s", b)
	assert.Equal(t, opBefore, opAfter, "the controller wrote nothing")
}

// TestRestartBeforeTheServingCertificateWritesNothing: the operator
// restarts while its custom certificate Secret is briefly missing. The
// mount-secret controller waits for the certificate instead of dropping
// CAs.operator.crt from the generated Secret (and rolling the tenant); once
// the same certificate is back, nothing has been written.
func TestRestartBeforeTheServingCertificateWritesNothing(t *testing.T) {
	ensureCRD(t)
	opNS, ns := operatorNamespace(t), operatorNamespace(t)
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, serviceDNSNames(opNS), now.Add(-time.Hour), now.Add(time.Hour))
	opCert := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM}
	putNamedSecret(t, opNS, customSecret, opCert)
	keyPairSecret(t, ns, "tenant-a-tls", true)
	statefulSet(t, ns, "tenant-a")
	env := k8sEnv(opNS, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+customSecret)
	op := startOperator(t, env)
	applyYAML(t, objectStoreYAML(ns, "tenant-a", []string{"tenant-a-tls"}, nil, nil))
	var gen *corev1.Secret
	require.Eventually(t, func() bool {
		var err error
		gen, err = generated(t, ns, "tenant-a")
		return err == nil && len(gen.Data["CAs.operator.crt"]) > 0 && restartValue(t, ns, "tenant-a") != ""
	}, 10*time.Second, 20*time.Millisecond)
	restart := restartValue(t, ns, "tenant-a")
	waitRolloutEnd(t, ns, "tenant-a")

	ww := watchWrites(t, ns, false)
	op.stop()
	require.NoError(t, adminClient(t).CoreV1().Secrets(opNS).Delete(t.Context(), customSecret, metav1.DeleteOptions{}))
	op = launchOperator(t, env)
	// What an admin sees: /readyz names the missing certificate, while the
	// mount-secret controller has seen the ObjectStore (and waits).
	require.Eventually(t, func() bool {
		ok, body := op.readyz()
		return !ok && strings.Contains(body, "serving-certificate") && counter(t, op, `workqueue_adds_total{name="mountsecret"}`) >= 1
	}, 20*time.Second, 20*time.Millisecond, "waiting for the serving certificate")
	putNamedSecret(t, opNS, customSecret, opCert)
	op.waitReady(t)
	waitSynced(t, op, "mountsecret")
	ww.quiet(t, time.Second, "nothing written by the restart")
	after, err := generated(t, ns, "tenant-a")
	require.NoError(t, err)
	assert.Equal(t, gen.ResourceVersion, after.ResourceVersion, "the generated Secret was not rewritten")
	assert.Equal(t, restart, restartValue(t, ns, "tenant-a"), "the tenant was not rolled")
	assert.Zero(t, counter(t, op, "objectstore_operator_mountsecret_rebuilds_total"))
}

// TestLongNamesAndOversizedSecretsAreReported: an ObjectStore with a
// 200-character name gets its generated Secret and its StatefulSet rolled
// (the label value is shortened, the full name annotated); one whose
// certificates add up to 1.5 MiB gets TooLarge naming the biggest inputs,
// and nothing is written.
func TestLongNamesAndOversizedSecretsAreReported(t *testing.T) {
	ensureCRD(t)
	ns := operatorNamespace(t)
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 139)
	require.Len(t, long, 200)
	keyPairSecret(t, ns, "tenant-a-tls", true)
	tenantStatefulSet(t, ns, long, 1, "minio")
	op := startOperator(t, k8sEnv(operatorNamespace(t)))
	applyYAML(t, objectStoreYAML(ns, long, []string{"tenant-a-tls"}, nil, nil))
	require.Eventually(t, func() bool {
		s, err := generated(t, ns, long)
		return err == nil && s.Annotations[apiv1.ObjectStoreNameAnnotation] == long && restartValue(t, ns, long) != ""
	}, 10*time.Second, 20*time.Millisecond, "generated Secret written and the StatefulSet found by the shortened label")
	s, err := generated(t, ns, long)
	require.NoError(t, err)
	assert.Equal(t, apiv1.ObjectStoreLabelValue(long), s.Labels[apiv1.ObjectStoreLabel])
	require.Eventually(t, func() bool { return condition(t, ns, long).Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)

	ca, _, _ := testutil.KeyPair(t, nil, []string{"big-ca"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	var bundle []byte
	for len(bundle) < 768<<10 { // two Secrets of 0.75 MiB: each fits, together they do not
		bundle = append(bundle, ca...)
	}
	putNamedSecret(t, ns, "big-ca-1", map[string][]byte{"ca.crt": bundle})
	putNamedSecret(t, ns, "big-ca-2", map[string][]byte{"ca.crt": bundle})
	applyYAML(t, objectStoreYAML(ns, "big", []string{"tenant-a-tls"}, nil, []string{"big-ca-1", "big-ca-2"}))
	var c metav1.Condition
	require.Eventually(t, func() bool { c = condition(t, ns, "big"); return c.Reason == "TooLarge" }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "CAs.trusted.big-ca-1.crt")
	assert.Contains(t, c.Message, "CAs.trusted.big-ca-2.crt")
	_, err = generated(t, ns, "big")
	assert.True(t, apierrors.IsNotFound(err), "nothing was written")
	series := fmt.Sprintf(`objectstore_operator_objectstore_condition{name="big",namespace="%s",reason="TooLarge",status="False",type="%s"}`, ns, apiv1.ConditionCertificatesReady)
	assert.Eventually(t, func() bool { return counter(t, op, series) == 1 }, 10*time.Second, 20*time.Millisecond, "what an SRE sees of the fleet")
}

// TestRestartInEveryCertificateModeWritesNothing: with an ObjectStore in
// place, an operator restart in each certificate mode writes neither the
// generated Secret nor a StatefulSet (a watch on the apiserver sees every
// write, the operator's or anyone's).
func TestRestartInEveryCertificateModeWritesNothing(t *testing.T) {
	ensureCRD(t)
	modes := []struct {
		name string
		// setup returns the operator's environment and arguments, and
		// whether pods are given the operator's CA.
		setup func(t *testing.T, opNS string) (env, args []string, ca bool)
	}{
		{"autocert", func(_ *testing.T, opNS string) ([]string, []string, bool) { return k8sEnv(opNS), nil, true }},
		{"custom Secret", func(t *testing.T, opNS string) ([]string, []string, bool) {
			now := time.Now()
			certPEM, keyPEM, _ := testutil.KeyPair(t, nil, serviceDNSNames(opNS), now.Add(-time.Hour), now.Add(time.Hour))
			putNamedSecret(t, opNS, customSecret, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM})
			return k8sEnv(opNS, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+customSecret), nil, true
		}},
		{"files", func(t *testing.T, opNS string) ([]string, []string, bool) {
			certFile, keyFile := kubeletServingCertFiles(t, opNS)
			// The files carry no CA: pods get theirs some other way.
			return k8sEnv(opNS), []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile}, false
		}},
		{"plain HTTP", func(_ *testing.T, opNS string) ([]string, []string, bool) {
			return k8sEnv(opNS, "OPERATOR_AUTO_CERT_DISABLED=on"), nil, false
		}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			opNS, ns := operatorNamespace(t), operatorNamespace(t)
			env, args, withCA := mode.setup(t, opNS)
			keyPairSecret(t, ns, "tenant-a-tls", true)
			statefulSet(t, ns, "tenant-a")
			op := startOperator(t, env, args...)
			applyYAML(t, objectStoreYAML(ns, "tenant-a", []string{"tenant-a-tls"}, nil, nil))
			require.Eventually(t, func() bool {
				gen, err := generated(t, ns, "tenant-a")
				return err == nil && (len(gen.Data["CAs.operator.crt"]) > 0) == withCA && restartValue(t, ns, "tenant-a") != ""
			}, 15*time.Second, 20*time.Millisecond)
			waitRolloutEnd(t, ns, "tenant-a")
			gen, err := generated(t, ns, "tenant-a")
			require.NoError(t, err)

			ww := watchWrites(t, ns, false)
			op.stop()
			op = startOperator(t, env, args...)
			// The restarted leader syncs every ObjectStore at once (its
			// queue's metrics count the work done); from the watch's start
			// until a second after that, nothing is written.
			waitSynced(t, op, "mountsecret")
			ww.quiet(t, time.Second, "nothing written by the restart")
			after, err := generated(t, ns, "tenant-a")
			require.NoError(t, err)
			assert.Equal(t, gen.ResourceVersion, after.ResourceVersion)
			assert.Zero(t, counter(t, op, "objectstore_operator_mountsecret_rebuilds_total"))
		})
	}
}
