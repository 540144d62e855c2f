package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// TestCRDValidatesWhatItsDescriptionSays: `kubectl explain objectstore`
// names the spec fields the apiserver validates; each is refused when
// wrong, and a field the schema does not declare is refused (issue 30:
// it was kept, so a typo was silent).
func TestCRDValidatesWhatItsDescriptionSays(t *testing.T) {
	ensureCRD(t)
	crd, err := dyn(t).Resource(crdResource).Get(t.Context(), "objectstores.aistor.min.io", metav1.GetOptions{})
	require.NoError(t, err)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NotEmpty(t, versions)
	description, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "description")

	ns := operatorNamespace(t)
	for _, tt := range []struct {
		field string
		spec  map[string]any
	}{
		{"image", map[string]any{"image": strings.Repeat("a", 1025)}},
		{"imagePullSecrets", map[string]any{"imagePullSecrets": []any{map[string]any{}}}},
		{"configuration", map[string]any{"configuration": map[string]any{}}},
		{"updates", map[string]any{"updates": map[string]any{"endpoint": "not a URL"}}},
		{"certificates", map[string]any{"certificates": map[string]any{"server": []any{map[string]any{"name": "Not_A_Name"}}}}},
	} {
		assert.Contains(t, description, tt.field, "the description names spec.%s as validated", tt.field)
		_, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Create(t.Context(), objectStore(ns, "bad-"+strings.ToLower(tt.field), tt.spec),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.True(t, apierrors.IsInvalid(err), "a wrong spec.%s is refused, got %v", tt.field, err)
	}
	// Every spec field is declared: a typo is refused, not stored and
	// ignored (updates would run at any hour with spec.update.window or
	// spec.maintenanceWindow set).
	for _, typo := range []map[string]any{
		{"update": map[string]any{"window": map[string]any{"schedule": "0 2 * * *", "duration": "2h"}}},
		{"maintenanceWindow": "0 2 * * *"},
		{"updates": map[string]any{"windw": map[string]any{"schedule": "0 2 * * *", "duration": "2h"}}},
		{"pools": []any{map[string]any{"servers": int64(4)}}},
	} {
		typo["image"] = "quay.io/minio/aistor/minio:RELEASE.2025-04-08T15-41-24Z"
		_, err := dyn(t).Resource(apiv1.Resource).Namespace(ns).Create(t.Context(), objectStore(ns, "typo", typo),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		require.Error(t, err, "%v is refused", typo)
		assert.Contains(t, err.Error(), "unknown field", "%v", typo)
	}
	// kubectl validates strictly by default: what a user applies with a
	// typo is refused, naming the field.
	manifest := filepath.Join(t.TempDir(), "typo.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: aistor.min.io/v1
kind: ObjectStore
metadata: {name: typo, namespace: `+ns+`}
spec:
  image: quay.io/minio/aistor/minio:RELEASE.2025-04-08T15-41-24Z
  update: {window: {schedule: "0 2 * * *", duration: 2h}}
`), 0o600))
	out, err := kubectlErr(t, "apply", "--dry-run=server", "-f", manifest)
	require.Error(t, err, "%s", out)
	assert.Contains(t, out, `unknown field "spec.update"`)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func objectStore(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiv1.GroupVersion.String(), "kind": apiv1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}
