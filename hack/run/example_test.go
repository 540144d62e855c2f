package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// The example tenant has everything docs/updates.md says a tenant needs
// from its user, as the operator looks for it: StatefulSets labelled for
// the ObjectStore with a minio container that mounts <name>-generated, the
// headless Service of the default admin endpoint, and the configuration
// Secret. make run applies it (TestMakeRunComesUpAndGoesDownCleanlyTwice
// updates it in place); this says which part is missing when it breaks.
func TestTheExampleTenantHasWhatTheOperatorNeeds(t *testing.T) {
	ex, err := loadExample(filepath.Join("..", ".."))
	require.NoError(t, err)
	assert.Equal(t, "demo-admin", ex.user, "credentials read from config.env")
	assert.NotEmpty(t, ex.password)

	var sts appsv1.StatefulSet
	require.NotNil(t, ex.find("StatefulSet", ""), "a StatefulSet")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(ex.find("StatefulSet", "").Object, &sts))
	assert.Equal(t, apiv1.ObjectStoreLabelValue(ex.name), sts.Labels[apiv1.ObjectStoreLabel], "labelled for its ObjectStore")
	assert.Equal(t, ex.namespace, sts.Namespace)
	i := slices.IndexFunc(sts.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "minio" })
	require.GreaterOrEqual(t, i, 0, "a container named minio")
	minio := sts.Spec.Template.Spec.Containers[i]
	store := ex.find(apiv1.Kind, "")
	image, _, err := unstructured.NestedString(store.Object, "spec", "image")
	require.NoError(t, err)
	assert.Equal(t, image, minio.Image, "the pods run the ObjectStore's image")

	var mountsGenerated bool
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret != nil && src.Secret.Name == apiv1.GeneratedSecretName(ex.name) &&
				slices.ContainsFunc(src.Secret.Items, func(k corev1.KeyToPath) bool { return k.Key == "CAs.operator.crt" }) {
				mountsGenerated = slices.ContainsFunc(minio.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == v.Name && slices.ContainsFunc(minio.Args, func(a string) bool { return a == "--certs-dir="+m.MountPath })
				})
			}
		}
	}
	assert.True(t, mountsGenerated, "minio's certs dir is %s, with CAs.operator.crt", apiv1.GeneratedSecretName(ex.name))

	var hl corev1.Service
	require.NotNil(t, ex.find("Service", ex.name+"-hl"), "the headless Service of the default admin endpoint")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(ex.find("Service", ex.name+"-hl").Object, &hl))
	assert.Equal(t, corev1.ClusterIPNone, hl.Spec.ClusterIP)
	assert.Equal(t, hl.Name, sts.Spec.ServiceName)
	assert.Equal(t, int32(9000), hl.Spec.Ports[0].Port)
	assert.NotNil(t, ex.find("Service", ex.name), "a Service for clients")

	manifest, err := ex.forMakeRun("127.0.0.1:5000/minio/aistor:RELEASE.2026-01-10T10-00-00Z", "https://127.0.0.1:9000")
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(manifest, "image: 127.0.0.1:5000/minio/aistor:RELEASE.2026-01-10T10-00-00Z"), "make run's image in the ObjectStore and the minio container")
	assert.Contains(t, manifest, "endpoint: https://127.0.0.1:9000")
	assert.NotContains(t, manifest, "quay.io", "nothing of the example's image is left")
}
