package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// nextVersionField is the optional field the "next chart version" adds to
// the CRD, under spec.updates (which, unlike spec, keeps no unknown field).
const nextVersionField = "nextVersionField"

// previousCRD writes the ObjectStore CRD of dir as the chart before
// this one shipped it: its spec kept unknown fields.
func previousCRD(t *testing.T, dir string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "objectstores.aistor.min.io.yaml")
	editCRD(t, filepath.Join(dir, "objectstores.aistor.min.io.yaml"), file, func(v map[string]any) {
		require.NoError(t, unstructured.SetNestedField(v, true, "schema", "openAPIV3Schema", "properties", "spec", "x-kubernetes-preserve-unknown-fields"))
	})
	return file
}

// editCRD writes to the CRD of from, each version edited by edit, to.
func editCRD(t *testing.T, from, to string, edit func(version map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(from)
	require.NoError(t, err)
	var crd map[string]any
	require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&crd))
	versions, _, err := unstructured.NestedSlice(crd, "spec", "versions")
	require.NoError(t, err)
	for i := range versions {
		v := versions[i].(map[string]any)
		edit(v)
		versions[i] = v
	}
	require.NoError(t, unstructured.SetNestedSlice(crd, versions, "spec", "versions"))
	out, err := json.Marshal(crd) // JSON is YAML
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, out, 0o600))
}

// nextChart copies the chart to a temporary directory as the next chart
// version: version 0.2.0, and an optional, validated field added to the
// ObjectStore CRD's spec.updates.
func nextChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "object-store-operator")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir(t))))

	chartYAML := filepath.Join(dir, "Chart.yaml")
	meta, err := os.ReadFile(chartYAML)
	require.NoError(t, err)
	require.Contains(t, string(meta), "\nversion: ")
	meta = []byte(strings.Replace(string(meta), "\nversion: ", "\nversion: 0.2.0\n# was: ", 1))
	require.NoError(t, os.WriteFile(chartYAML, meta, 0o600))

	crdFile := filepath.Join(dir, "crds", "objectstores.aistor.min.io.yaml")
	editCRD(t, crdFile, crdFile, func(v map[string]any) {
		// A changed field too, as most CRD updates have: its owner is
		// whoever wrote the CRD before (Helm's install).
		require.NoError(t, unstructured.SetNestedField(v, "A MinIO object store (next chart version).", "schema", "openAPIV3Schema", "description"))
		require.NoError(t, unstructured.SetNestedField(v, map[string]any{
			"type":        "string",
			"description": "Added by the next chart version (test).",
			"pattern":     "^[a-z]+$",
			"maxLength":   int64(63),
		}, "schema", "openAPIV3Schema", "properties", "spec", "properties", "updates", "properties", nextVersionField))
	})
	return dir
}

// createWithNextField creates an ObjectStore that sets the new field, with
// strict field validation (an unknown field is an error, not dropped).
func createWithNextField(t *testing.T, ns, name, value string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1",
		"kind":       "ObjectStore",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"image":   "quay.io/minio/aistor/minio:RELEASE.2025-04-08T15-41-24Z",
			"updates": map[string]any{nextVersionField: value},
		},
	}}
	_, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{FieldValidation: "Strict"})
	return err
}

// kubectlErr runs the pinned kubectl and returns its output and error.
func kubectlErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", testCluster.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// Helm installs crds/ once and never upgrades them. The documented step
// (docs/install.md, upgrading) applies the new chart's CRDs server-side,
// then helm upgrade: every ObjectStore is kept and the new field works.
func TestChartUpgradeAcrossACRDChangeKeepsEveryObjectStore(t *testing.T) {
	ensureCRD(t)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	current := filepath.Join(root, "helm", "object-store-operator", "crds")
	t.Cleanup(func() {
		// Later tests get the CRD this checkout ships again.
		out, err := kubectlErr(t, "apply", "--server-side", "--force-conflicts", "-f", current)
		assert.NoError(t, err, "restore the CRD: %s", out)
	})

	// The CRD as Helm 4 installs it: server-side applied by the field
	// manager "helm" (Helm 3 creates it; either way another manager owns
	// its fields when the upgrade comes). It is the CRD of the chart before
	// this one, whose spec kept unknown fields.
	kubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "helm", "-f", previousCRD(t, current))
	ns := operatorNamespace(t)
	helm(t, "install", "osop", chartDir(t), "-n", ns)

	tenants := []string{operatorNamespace(t), operatorNamespace(t)}
	t.Cleanup(func() {
		// The next test's operator watches every namespace: leave no
		// ObjectStore of this test behind, even one being torn down.
		for _, tn := range tenants {
			_ = dyn(t).Resource(apiv1.Resource).Namespace(tn).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		assert.Eventually(t, func() bool {
			for _, tn := range tenants {
				list, err := dyn(t).Resource(apiv1.Resource).Namespace(tn).List(context.Background(), metav1.ListOptions{})
				if err != nil || len(list.Items) > 0 {
					return false
				}
			}
			return true
		}, time.Minute, 50*time.Millisecond, "this test's ObjectStores are deleted")
	})
	type storeKey struct{ ns, name string }
	before := map[storeKey]*unstructured.Unstructured{}
	for _, tn := range tenants {
		for i := range 3 {
			name := fmt.Sprintf("store-%d", i)
			applyYAML(t, objectStoreYAML(tn, name, []string{name + "-tls"}, nil, []string{"ca-" + name}))
			u, err := dyn(t).Resource(apiv1.Resource).Namespace(tn).Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			before[storeKey{tn, name}] = u
		}
	}
	err = createWithNextField(t, tenants[0], "too-early", "abc")
	require.Error(t, err, "the installed CRD does not know the field yet")
	assert.Contains(t, err.Error(), "unknown field")

	next := nextChart(t)
	helm(t, "upgrade", "osop", next, "-n", ns)
	err = createWithNextField(t, tenants[0], "helm-alone", "abc")
	require.Error(t, err, "helm upgrade alone leaves the CRD as it was")
	assert.Contains(t, err.Error(), "unknown field")

	// The documented step. Without --force-conflicts the apply is refused
	// for the changed description: that field belongs to the manager that
	// installed the CRD.
	out, err := kubectlErr(t, "apply", "--server-side", "-f", filepath.Join(next, "crds"))
	require.Error(t, err, "kubectl apply --server-side without --force-conflicts: %s", out)
	assert.Contains(t, out, "conflict")
	kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(next, "crds"))
	kubectl(t, "wait", "--for=condition=Established", "crd/objectstores.aistor.min.io", "--timeout=30s")
	helm(t, "upgrade", "osop", next, "-n", ns)
	assert.Contains(t, helm(t, "list", "-n", ns), "object-store-operator-0.2.0")

	// The apiserver serves a new schema once it has rebuilt its handler
	// for the CRD: poll for the field to be accepted.
	require.Eventually(t, func() bool {
		err := createWithNextField(t, tenants[0], "after-upgrade", "abc")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the upgraded CRD accepts spec.updates.%s", nextVersionField)
	got, err := dyn(t).Resource(apiv1.Resource).Namespace(tenants[0]).Get(t.Context(), "after-upgrade", metav1.GetOptions{})
	require.NoError(t, err)
	value, _, _ := unstructured.NestedString(got.Object, "spec", "updates", nextVersionField)
	assert.Equal(t, "abc", value, "the new field is stored, not pruned")
	require.Eventually(t, func() bool {
		_, err := dyn(t).Resource(apiv1.Resource).Namespace(tenants[0]).Create(t.Context(),
			objectStore(tenants[0], "typo", map[string]any{"update": map[string]any{"window": "x"}}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		return err != nil && strings.Contains(err.Error(), "unknown field")
	}, 30*time.Second, 50*time.Millisecond, "after the upgrade a spec field the schema does not name is refused: "+
		"the apply replaces the schema whole (it is atomic), so the previous chart's x-kubernetes-preserve-unknown-fields goes too")
	err = createWithNextField(t, tenants[0], "invalid", "NOT-LOWER")
	require.Error(t, err, "the new field is validated by the new schema")
	assert.Contains(t, err.Error(), nextVersionField)

	// Every ObjectStore is kept: same UID, same spec.
	for _, tn := range tenants {
		list, err := dyn(t).Resource(apiv1.Resource).Namespace(tn).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		uids := map[string]types.UID{}
		for _, u := range list.Items {
			uids[u.GetName()] = u.GetUID()
		}
		for k, u := range before {
			if k.ns != tn {
				continue
			}
			after, err := dyn(t).Resource(apiv1.Resource).Namespace(tn).Get(t.Context(), k.name, metav1.GetOptions{})
			require.NoError(t, err, "%s/%s kept", k.ns, k.name)
			assert.Equal(t, u.GetUID(), after.GetUID(), "%s/%s is the same object", k.ns, k.name)
			assert.Equal(t, u.Object["spec"], after.Object["spec"], "%s/%s spec unchanged", k.ns, k.name)
			delete(uids, k.name)
		}
		if tn == tenants[0] {
			assert.Equal(t, map[string]types.UID{"after-upgrade": got.GetUID()}, uids, "only the new ObjectStore besides the old ones")
		} else {
			assert.Empty(t, uids)
		}
	}
}
