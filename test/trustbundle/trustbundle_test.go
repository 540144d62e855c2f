package trustbundle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/trustbundle"
)

// bundleName is the ClusterTrustBundle of the install in ns, as
// docs/trust.md gives it.
func bundleName(ns string) string { return "aistor.min.io:object-store-operator:" + ns }

// bundle returns the install's bundle, nil while there is none.
func bundle(t *testing.T, ns string) *certificatesv1beta1.ClusterTrustBundle {
	t.Helper()
	b, err := adminClient(t).CertificatesV1beta1().ClusterTrustBundles().Get(t.Context(), bundleName(ns), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return b
}

// waitBundle waits until the bundle holds exactly the CA certificates of
// caPEM and returns it.
func waitBundle(t *testing.T, ns string, caPEM []byte) *certificatesv1beta1.ClusterTrustBundle {
	t.Helper()
	want := certDERs(t, caPEM)
	var got *certificatesv1beta1.ClusterTrustBundle
	require.Eventually(t, func() bool {
		got = bundle(t, ns)
		return got != nil && assert.ObjectsAreEqual(want, certDERs(t, []byte(got.Spec.TrustBundle)))
	}, 30*time.Second, 50*time.Millisecond, "ClusterTrustBundle %s never held the expected CA", bundleName(ns))
	return got
}

func certDERs(t *testing.T, in []byte) []string {
	t.Helper()
	var out []string
	for {
		var b *pem.Block
		b, in = pem.Decode(in)
		if b == nil {
			return out
		}
		out = append(out, string(b.Bytes))
	}
}

// clusterTrustBundlePod is a pod that mounts the install's bundle both
// ways docs/trust.md shows: by name, and by signer name and label.
func clusterTrustBundlePod(ns, operatorNS string) *corev1.Pod {
	name := bundleName(operatorNS)
	signer := trustbundle.SignerName
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "minio-0", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "minio", Image: "minio/aistor:latest",
				VolumeMounts: []corev1.VolumeMount{{Name: "operator-ca", MountPath: "/tmp/certs/CAs", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "operator-ca", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: &name, Path: "operator.crt"}},
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{
						SignerName:    &signer,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{trustbundle.NamespaceLabel: operatorNS}},
						Path:          "operator-by-signer.crt",
					}},
				},
			}}}},
		},
	}
}

// The autocert mode on a cluster whose kubelet-serving CA is not the
// cluster CA, told so with OPERATOR_SERVING_CA_SECRET: the bundle holds
// the kubelet-serving CA, the very CA the generated Secrets give pods; it
// is made again when deleted; a pod that mounts it is admitted.
func TestBundleHoldsTheServingCAAndPodsMayMountIt(t *testing.T) {
	ns := namespace(t)
	cs := adminClient(t)
	_, err := cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-serving-ca"},
		Data:       map[string][]byte{"ca.crt": testCluster.KubeletServingCA},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	startOperator(t, []string{"KUBECONFIG=" + testCluster.Kubeconfig, "OPERATOR_NAMESPACE=" + ns,
		"OPERATOR_SERVING_CA_SECRET=kubelet-serving-ca"})

	b := waitBundle(t, ns, testCluster.KubeletServingCA)
	assert.Equal(t, trustbundle.SignerName, b.Spec.SignerName)
	assert.Equal(t, ns, b.Labels[trustbundle.NamespaceLabel])
	assert.Equal(t, "object-store-operator", b.Labels["app.kubernetes.io/managed-by"])
	assert.Empty(t, b.OwnerReferences, "no owner configured: the bundle is removed by hand (docs/trust.md)")

	// Deleted by someone: made again.
	require.NoError(t, cs.CertificatesV1beta1().ClusterTrustBundles().Delete(t.Context(), b.Name, metav1.DeleteOptions{}))
	again := waitBundle(t, ns, testCluster.KubeletServingCA)
	assert.NotEqual(t, b.UID, again.UID)
	t.Cleanup(func() {
		_ = cs.CertificatesV1beta1().ClusterTrustBundles().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})

	// The projected-volume form docs/trust.md gives is admitted, and kept
	// (a disabled ClusterTrustBundleProjection gate would drop it).
	tenant := namespace(t)
	pod, err := cs.CoreV1().Pods(tenant).Create(t.Context(), clusterTrustBundlePod(tenant, ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "a pod mounting the bundle is admitted")
	sources := pod.Spec.Volumes[0].Projected.Sources
	require.Len(t, sources, 2)
	require.NotNil(t, sources[0].ClusterTrustBundle)
	assert.Equal(t, bundleName(ns), *sources[0].ClusterTrustBundle.Name)
	require.NotNil(t, sources[1].ClusterTrustBundle)
	assert.Equal(t, trustbundle.SignerName, *sources[1].ClusterTrustBundle.SignerName)
}

// customSecret writes the custom-mode Secret: a leaf for the Service
// names signed by ca, and ca as ca.crt.
func customSecret(t *testing.T, ns string, ca *testutil.CA) {
	t.Helper()
	leaf := ca.Leaf(t, "object-store-operator."+ns+".svc", "object-store-operator", "object-store-operator."+ns,
		"object-store-operator."+ns+".svc.cluster.local")
	data := map[string][]byte{"tls.crt": certPEM(leaf), "tls.key": keyPEM(t, leaf), "ca.crt": ca.PEM}
	cs := adminClient(t)
	s, err := cs.CoreV1().Secrets(ns).Get(t.Context(), "custom-tls", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "custom-tls"}, Type: corev1.SecretTypeTLS, Data: data,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	require.NoError(t, err)
	s.Data = data
	_, err = cs.CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func certPEM(c tls.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
}

func keyPEM(t *testing.T, c tls.Certificate) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// A custom certificate whose CA changes (cert-manager re-issuing from a
// new CA): the bundle follows, the old CA is no longer in it, and the
// bundle is written by the operator alone.
func TestBundleFollowsARotatedCA(t *testing.T) {
	ns := namespace(t)
	first := testutil.NewCA(t, "first CA")
	customSecret(t, ns, first)
	startOperator(t, []string{"KUBECONFIG=" + testCluster.Kubeconfig, "OPERATOR_NAMESPACE=" + ns,
		"OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME=custom-tls"})
	b := waitBundle(t, ns, first.PEM)
	t.Cleanup(func() {
		_ = adminClient(t).CertificatesV1beta1().ClusterTrustBundles().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})

	second := testutil.NewCA(t, "second CA")
	start := time.Now()
	customSecret(t, ns, second)
	rotated := waitBundle(t, ns, second.PEM)
	t.Logf("the bundle held the new CA %s after the Secret changed", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, b.UID, rotated.UID, "the bundle is updated in place")
	assert.NotContains(t, rotated.Spec.TrustBundle, strings.TrimSpace(string(first.PEM)))
	for _, f := range rotated.ManagedFields {
		assert.Equal(t, trustbundle.FieldManager, f.Manager)
	}
}

// deploymentEnv is the env the chart's Deployment gives the operator, the
// downward API resolved; addresses and the store are the test's own.
func deploymentEnv(t *testing.T, ns string) []string {
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
		case e.Name == "OPERATOR_UPGRADE_ADDRESS" || e.Name == "OPERATOR_METRICS_ADDRESS" || e.Name == "OPERATOR_UPDATE_DIR":
			// startOperator picks its own.
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

// Installed with the chart, under the chart's ServiceAccount and its
// admission policy: the bundle is published, owned by the chart's
// ClusterRole; the ServiceAccount can write no other bundle, nor its own
// with another install's label; helm uninstall removes the bundle (the
// garbage collector, following the owner reference), while the operator
// still runs, and it is not made again.
func TestChartPublishesAndHelmUninstallRemovesTheBundle(t *testing.T) {
	cs := adminClient(t)
	ns := namespace(t)
	helm(t, "install", "osop", "helm/object-store-operator", "-n", ns)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			helm(t, "uninstall", "osop", "-n", ns)
		}
	})
	kubeconfig, saConfig, err := testCluster.ServiceAccountKubeconfig(t.Context(), ns, "object-store-operator")
	require.NoError(t, err)
	sa, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err)
	env := append(deploymentEnv(t, ns), "KUBECONFIG="+kubeconfig)
	assert.Contains(t, env, "OPERATOR_CLUSTER_TRUST_BUNDLE_OWNER=object-store-operator-"+ns, "the chart names its ClusterRole as the owner")
	op := startOperator(t, env)

	// Autocert here serves a kubelet-serving certificate and gives pods
	// the cluster CA (kube-root-ca.crt): what the bundle must hold too.
	root, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
	require.NoError(t, err)
	b := waitBundle(t, ns, []byte(root.Data["ca.crt"]))
	role, err := cs.RbacV1().ClusterRoles().Get(t.Context(), "object-store-operator-"+ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, b.OwnerReferences, 1)
	assert.Equal(t, metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name, UID: role.UID},
		b.OwnerReferences[0])
	assert.NotContains(t, op.logs.String(), `"level":"error"`)

	// What the ServiceAccount may not do.
	other := &certificatesv1beta1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "aistor.min.io:object-store-operator:someone-else"},
		Spec:       certificatesv1beta1.ClusterTrustBundleSpec{SignerName: trustbundle.SignerName, TrustBundle: b.Spec.TrustBundle},
	}
	_, err = sa.CertificatesV1beta1().ClusterTrustBundles().Create(t.Context(), other, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another install's bundle must be forbidden, got %v", err)
	unsigned := &certificatesv1beta1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "anything"}, Spec: certificatesv1beta1.ClusterTrustBundleSpec{TrustBundle: b.Spec.TrustBundle},
	}
	_, err = sa.CertificatesV1beta1().ClusterTrustBundles().Create(t.Context(), unsigned, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "a bundle of another name must be forbidden, got %v", err)
	relabel := []byte(`{"metadata":{"labels":{"aistor.min.io/operator-namespace":"someone-else"}}}`)
	// An admission policy is in force some time after helm created it (the
	// apiserver compiles it on its own); a dry run tells when, and writes
	// nothing.
	require.Eventually(t, func() bool {
		_, err := sa.CertificatesV1beta1().ClusterTrustBundles().Patch(t.Context(), b.Name, types.MergePatchType, relabel,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 30*time.Second, 50*time.Millisecond, "the chart's admission policy comes into force")
	_, err = sa.CertificatesV1beta1().ClusterTrustBundles().Patch(t.Context(), b.Name, types.MergePatchType, relabel, metav1.PatchOptions{})
	require.Error(t, err, "its own bundle labelled as another install's must be refused (admission policy)")
	assert.Contains(t, err.Error(), "the object-store operator writes only its own ClusterTrustBundle")
	err = sa.CertificatesV1beta1().ClusterTrustBundles().Delete(t.Context(), b.Name, metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting the bundle is left to the garbage collector, got %v", err)

	helm(t, "uninstall", "osop", "-n", ns)
	uninstalled = true
	require.Eventually(t, func() bool { return bundle(t, ns) == nil }, 60*time.Second, 100*time.Millisecond,
		"helm uninstall removes the bundle")
	// Still running, the operator does not make it again: its owner is
	// gone, and so are its rights.
	op.stop()
	assert.Nil(t, bundle(t, ns))
}
