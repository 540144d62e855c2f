package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/object-store-operator/operator/internal/claim"
)

// TestATenantsForgedClaimRefusesNoInstall: a tenant with full control of
// its namespace (the admin ClusterRole bound there) tries to forge a
// claim of every namespace, as well as it can: as itself, and as a
// ServiceAccount object-store-operator it created in its namespace and
// bound, with a RoleBinding, to the chart's own ClusterRole; and the
// Lease an install used to claim with. A NamespaceClaim is cluster-scoped:
// a RoleBinding grants nothing on it, so the apiserver refuses both
// (under the real apiserver's RBAC). The install, whose claim the chart
// made after the tenant's attempts, is not refused and reconciles the
// tenant.
func TestATenantsForgedClaimRefusesNoInstall(t *testing.T) {
	ensureCRD(t)
	opNS, tenantNS := operatorNamespace(t), operatorNamespace(t)
	admin := adminClient(t)
	ctx := t.Context()

	_, err := admin.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "object-store-operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	forger := serviceAccountUser(tenantNS)
	tenantAdmin := "tenant-admin-" + tenantNS
	for _, b := range []struct{ name, role, kind, subject string }{
		{"tenant-admin", "admin", rbacv1.UserKind, tenantAdmin},
		{"forged-claim", "object-store-operator-" + opNS, rbacv1.ServiceAccountKind, "object-store-operator"},
	} {
		subject := rbacv1.Subject{Kind: b.kind, Name: b.subject}
		if b.kind == rbacv1.ServiceAccountKind {
			subject.Namespace = tenantNS
		} else {
			subject.APIGroup = rbacv1.GroupName
		}
		_, err = admin.RbacV1().RoleBindings(tenantNS).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{subject},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	installChart(t, opNS, tenantNS)

	// Who may create a NamespaceClaim: no one of the tenant's.
	may := func(user, ns, verb string) bool {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: claim.Resource.Group, Resource: claim.Resource.Resource, Verb: verb}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	assert.True(t, may(forger, tenantNS, "list"), "the RoleBinding is in place: the ClusterRole's grants, in the tenant's namespace")
	assert.True(t, may(serviceAccountUser(opNS), "", "list"), "the install reads every claim")
	for _, user := range []string{forger, tenantAdmin, serviceAccountUser(opNS)} {
		assert.False(t, may(user, "", "create"), "%s may not make a claim", user)
	}

	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1", "kind": "NamespaceClaim",
		"metadata": map[string]any{"name": tenantNS},
		"spec":     map[string]any{"install": "object-store-operator", "namespaces": []any{}},
	}}
	for _, user := range []string{forger, tenantAdmin} {
		cfg := rest.CopyConfig(testCluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		if user == forger {
			cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + tenantNS, "system:authenticated"}
		}
		as, err := dynamic.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = as.Resource(claim.Resource).Create(ctx, forged, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "%s forges a claim of every namespace: %v", user, err)
	}
	// The Lease an older version claimed with (namespace admins commonly
	// may write Leases) counts for nothing.
	holder := "tenant"
	_, err = admin.CoordinationV1().Leases(tenantNS).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "object-store-operator-claim", Labels: map[string]string{"aistor.min.io/namespace-claim": "true"},
			Annotations: map[string]string{"aistor.min.io/watch-namespaces": "*", "aistor.min.io/service-account": forger}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	op := runInstall(t, opNS)
	op.op.waitReady(t)
	tenantStore(t, tenantNS, "store")
	waitGenerated(t, tenantNS, "store")
	ok, body := op.op.readyz()
	assert.True(t, ok, "ready: %s", body)
	assert.Equal(t, 1.0, metricValue(t, op.op, "objectstore_operator_namespace_claim_held"))
}
