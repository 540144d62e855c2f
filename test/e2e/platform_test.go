package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

const labelArch = "kubernetes.io/arch"

// labelGroup keeps one test's pods off another's Nodes: its value is the
// test's namespace, on its Nodes and in its pods' node selectors.
const labelGroup = "e2e.object-store-operator/group"

// createNode creates a Node labelled linux/<arch> in group, removed when
// the test ends. The pod driver binds pods whose nodeSelector it matches
// (test/cluster/pods.go).
func createNode(t testing.TB, name, arch, group string) {
	t.Helper()
	cs := adminClient(t)
	_, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/os": "linux", labelArch: arch, labelGroup: group}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete Node %s: %v", name, err)
		}
	})
}

// tenantPool is a further pool of the store (StatefulSet name), its pods
// selected by their pool and pinned by nodeSelector.
func tenantPool(t testing.TB, ns, store, name string, replicas int32, image string, nodeSelector map[string]string) {
	t.Helper()
	labels := map[string]string{"app": apiv1.ObjectStoreLabelValue(store), "pool": name}
	_, err := adminClient(t).AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{apiv1.ObjectStoreLabel: apiv1.ObjectStoreLabelValue(store)},
			Annotations: map[string]string{apiv1.ObjectStoreNameAnnotation: store},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: nodeSelector,
					Containers: []corev1.Container{{Name: "minio", Image: image}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitBound waits until want pods of the namespace run on each node.
func waitBound(t testing.TB, ns string, want map[string]int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list, err := adminClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(c, err)
		have := map[string]int{}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				have[p.Spec.NodeName]++
			}
		}
		assert.Equal(c, want, have)
	}, 30*time.Second, 50*time.Millisecond, "pods bound to their Nodes")
}

// TestTenantOnArmNodesGetsTheArmBinary: one image for linux/amd64 and
// linux/arm64; the tenant whose pods run on an arm64 Node is named and
// served the arm64 binary, a tenant with no pods the amd64 one, and a
// tenant on arm64 Nodes whose image has no arm64 binary is told so.
func TestTenantOnArmNodesGetsTheArmBinary(t *testing.T) {
	e := newBinEnv(t)
	armNode, amdNode := "arm-"+e.tenantNS, "amd-"+e.tenantNS
	// The amd64 Node sorts first: the arm64 pods are there by their selector.
	createNode(t, amdNode, "amd64", e.tenantNS)
	createNode(t, armNode, "arm64", e.tenantNS)
	amd, arm := randomBytes(t, 2<<20), randomBytes(t, 2<<20)
	image := e.reg.pushIndex(t, "minio/aistor:"+release, map[string]imageSpec{
		"linux/amd64": {binary: amd, releaseLbl: release},
		"linux/arm64": {binary: arm, releaseLbl: release},
	})
	amdOnly := e.reg.pushImage(t, "minio/amd-only:"+release, imageSpec{binary: randomBytes(t, 1<<20), releaseLbl: release})
	onArm := map[string]string{labelArch: "arm64", labelGroup: e.tenantNS}
	e.objectStore(t, "on-arm", image, "regcred")
	e.objectStore(t, "no-pods", image, "regcred")
	e.objectStore(t, "arm-without-binary", amdOnly, "regcred")
	tenantPool(t, e.tenantNS, "on-arm", "on-arm-pool-0", 2, image, onArm)
	tenantPool(t, e.tenantNS, "arm-without-binary", "awb-pool-0", 1, amdOnly, onArm)
	waitBound(t, e.tenantNS, map[string]int{armNode: 3})

	c := e.op.client(t, testCluster.KubeletServingCA, 2)
	st := waitBinaryStatus(t, e.tenantNS, "on-arm", arm)
	assert.Equal(t, "linux-arm64", st.Platform)
	assert.Equal(t, release, st.Release)
	assert.Equal(t, arm, updateClientWalk(t, c, st.URL), "its URL serves the arm64 binary")
	cond := e.waitBinaryCondition(t, "on-arm", metav1.ConditionTrue, "Available")
	assert.Contains(t, cond.Message, "pods run on linux/arm64")

	st = waitBinaryStatus(t, e.tenantNS, "no-pods", amd)
	assert.Equal(t, "linux-amd64", st.Platform, "no pods, no node selector: linux/amd64")
	assert.Equal(t, amd, updateClientWalk(t, c, st.URL))

	cond = e.waitBinaryCondition(t, "arm-without-binary", metav1.ConditionFalse, "NoBinaryForPlatform")
	assert.Contains(t, cond.Message, "no binary for linux/arm64")
	assert.Contains(t, cond.Message, "OPERATOR_PLATFORMS", "the remedy")
}

// TestTenantOnMixedPlatformsIsRolledNotUpdatedInPlace: a tenant with a
// pool on an amd64 Node and a pool on an arm64 Node. MinIO would push one
// binary to every node, so the new image is rolled out, never updated in
// place, and VersionCurrent says why.
func TestTenantOnMixedPlatformsIsRolledNotUpdatedInPlace(t *testing.T) {
	ns := operatorNamespace(t)
	armNode, amdNode := "arm-"+ns, "amd-"+ns
	createNode(t, amdNode, "amd64", ns)
	createNode(t, armNode, "arm64", ns)
	e := newUpdateEnv(t, updateOpts{nodeSelector: map[string]string{labelArch: "amd64", labelGroup: ns}})
	tenantPool(t, e.tenantNS, e.store, e.store+"-pool-1", 1, e.oldImage, map[string]string{labelArch: "arm64", labelGroup: ns})
	waitBound(t, e.tenantNS, map[string]int{amdNode: 2, armNode: 1})
	e.waitVersion(t, metav1.ConditionTrue, "Current", 60*time.Second)

	e.setImage(t, e.newImage)
	c := e.waitVersion(t, metav1.ConditionFalse, "RollingUpdate", 2*time.Minute)
	assert.Contains(t, c.Message, "linux/amd64, linux/arm64", "names the platforms")
	assert.Contains(t, c.Message, "not updated in place")
	assert.Contains(t, c.Message, "nodeSelector on kubernetes.io/arch", "the remedy")
	assert.Zero(t, updateCalls(e.op, e.newer), "MinIO was never asked to update")
	assert.Equal(t, e.newImage, e.statefulSetImage(t))
	s, err := adminClient(t).AppsV1().StatefulSets(e.tenantNS).Get(t.Context(), e.store+"-pool-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, e.newImage, s.Spec.Template.Spec.Containers[0].Image, "every pool is rolled")
	assert.True(t, e.minio.allRun(t, e.older), "nothing changed in place")
	assert.True(t, strings.Contains(kubectl(t, "describe", "objectstore", e.store, "-n", e.tenantNS), "RollingUpdate"), "an Event says it")
}
