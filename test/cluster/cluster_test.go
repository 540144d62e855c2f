package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/test/cluster"
)

var testCluster *cluster.Cluster

func TestMain(m *testing.M) { os.Exit(cluster.Main(m, &testCluster)) }

func admin(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := testCluster.Clientset()
	require.NoError(t, err)
	return cs
}

func TestKubeletServingCSRIsSignedByTheKubeletServingCA(t *testing.T) {
	certPEM, keyPEM, err := testCluster.IssueKubeletServingCert(t.Context(), []string{"harness.test.svc", "harness"})
	require.NoError(t, err)
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err, "the issued certificate matches the requested key")

	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block, "issued certificate is not PEM")
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, []string{"system:nodes"}, leaf.Subject.Organization)
	assert.Equal(t, "system:node:harness.test.svc", leaf.Subject.CommonName)

	kubeletPool := x509.NewCertPool()
	require.True(t, kubeletPool.AppendCertsFromPEM(testCluster.KubeletServingCA))
	_, err = leaf.Verify(x509.VerifyOptions{
		DNSName: "harness.test.svc", Roots: kubeletPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	assert.NoError(t, err, "certificate must verify against the kubelet-serving CA")

	clusterPool := x509.NewCertPool()
	require.True(t, clusterPool.AppendCertsFromPEM(testCluster.ClusterCA))
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "harness.test.svc", Roots: clusterPool})
	assert.Error(t, err, "the kubelet-serving CA must differ from the cluster CA")
}

func TestServiceAccountKubeconfigHasExactlyTheRoleRights(t *testing.T) {
	ctx := t.Context()
	cs := admin(t)
	ns := createNamespace(t, cs, "harness-rbac")

	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	path, cfg, err := testCluster.ServiceAccountKubeconfig(ctx, ns, "reader")
	require.NoError(t, err)
	assert.FileExists(t, path)
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	_, err = sa.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "the Role grants listing ConfigMaps")
	_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "listing Secrets must be forbidden, got %v", err)
	_, err = sa.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the Role does not reach other namespaces, got %v", err)
}

func TestGarbageCollectorDeletesOwnedSecret(t *testing.T) {
	ctx := t.Context()
	cs := admin(t)
	ns := createNamespace(t, cs, "harness-gc")

	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "child",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Secrets(ns).Get(ctx, "child", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 50*time.Millisecond, "the owned Secret must be garbage-collected")
}

func createNamespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
