package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/mountsecret"
)

// renderPolicy renders the chart as for an apiserver that serves
// ValidatingAdmissionPolicy and returns the policy, or nil.
func renderPolicy(t *testing.T, args ...string) *admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "osop", filepath.Join("..", "..", "helm", "object-store-operator"), "-n", "ops",
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "--kube-version", chartKubeVersion}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm template: %s", stderr.String())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		require.NoError(t, err)
		if raw["kind"] == "ValidatingAdmissionPolicy" {
			var p admissionv1.ValidatingAdmissionPolicy
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &p))
			return &p
		}
		raw = nil
	}
}

func jsonFields(v any, except ...string) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && !strings.Contains(strings.Join(except, " ")+" ", name+" ") {
			out = append(out, name)
		}
	}
	return out
}

// The policy holds StatefulSet patches to "everything else equal" by
// naming every field: a Kubernetes update that adds one must add it there.
func TestAdmissionPolicyComparesEveryField(t *testing.T) {
	p := renderPolicy(t)
	require.NotNil(t, p, "the policy is on by default where the API is served")
	var all strings.Builder
	for _, v := range p.Spec.Variables {
		all.WriteString(v.Expression + "\n")
	}
	for _, v := range p.Spec.Validations {
		all.WriteString(v.Expression + "\n")
	}
	expr := all.String()
	for _, f := range jsonFields(appsv1.StatefulSetSpec{}, "template", "updateStrategy") {
		assert.Contains(t, expr, "object.spec.?"+f+" == oldObject.spec.?"+f, "StatefulSetSpec.%s", f)
	}
	// Of the update strategy, the partition alone may change: the
	// rollout holds it while it replaces the pods itself.
	for _, f := range jsonFields(appsv1.StatefulSetUpdateStrategy{}, "rollingUpdate") {
		assert.Contains(t, expr, "object.spec.?updateStrategy.?"+f+" == oldObject.spec.?updateStrategy.?"+f, "StatefulSetUpdateStrategy.%s", f)
	}
	for _, f := range jsonFields(appsv1.RollingUpdateStatefulSetStrategy{}, "partition") {
		assert.Contains(t, expr, "object.spec.?updateStrategy.?rollingUpdate.?"+f+" == oldObject.spec.?updateStrategy.?rollingUpdate.?"+f, "RollingUpdateStatefulSetStrategy.%s", f)
	}
	for _, f := range jsonFields(metav1.ObjectMeta{}, "annotations") {
		assert.Contains(t, expr, "object.spec.template.metadata.?"+f+" == oldObject.spec.template.metadata.?"+f, "pod template ObjectMeta.%s", f)
	}
	for _, f := range jsonFields(corev1.PodSpec{}, "containers") {
		assert.Contains(t, expr, "object.spec.template.spec.?"+f+" == oldObject.spec.template.spec.?"+f, "PodSpec.%s", f)
	}
	for _, f := range jsonFields(corev1.Container{}, "name", "image") {
		assert.Contains(t, expr, "c.?"+f+" == o.?"+f, "the minio Container.%s", f)
	}
	// The names the policy holds the operator to are the ones the code
	// uses ("minio" is the updater's containerName, "-generated" the
	// suffix of apiv1.GeneratedSecretName).
	for _, s := range []string{mountsecret.RestartAnnotation, apiv1.RolloutAnnotation, apiv1.ObjectStoreLabel, "'minio'", "'" + apiv1.GeneratedSecretName("") + "'",
		autocert.ManagedByLabel, autocert.ManagedByValue} {
		assert.Contains(t, expr, s)
	}
	require.Len(t, p.Spec.MatchConditions, 1)
	assert.Equal(t, `request.userInfo.username == "system:serviceaccount:ops:object-store-operator"`, p.Spec.MatchConditions[0].Expression,
		"only the operator's ServiceAccount is held")
	assert.NotContains(t, expr, "leases", "the operator writes no claim: the chart makes it, RBAC grants no write on it")

	assert.Nil(t, renderPolicy(t, "--set", "admissionPolicy.enabled=false"), "the value turns it off")
}
