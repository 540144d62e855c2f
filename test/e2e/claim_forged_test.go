package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/internal/claim"
)

// TestATenantsForgedClaimRefusesNoInstall: a tenant with full control of
// its namespace forges the install's claim there, as well as it can: a
// Lease object-store-operator-claim labelled as a claim of every
// namespace, naming a ServiceAccount object-store-operator it created in
// its namespace and bound, with a RoleBinding, to the chart's own
// ClusterRole. The install, started after (so its claim is the younger),
// is not refused and reconciles the tenant: the RoleBinding grants the
// claim mark only in the tenant's namespace, and a claim counts only
// with the mark cluster-wide, under the real apiserver's RBAC.
func TestATenantsForgedClaimRefusesNoInstall(t *testing.T) {
	ensureCRD(t)
	opNS, tenantNS := operatorNamespace(t), operatorNamespace(t)
	installChart(t, opNS, tenantNS)
	admin := adminClient(t)
	ctx := t.Context()

	_, err := admin.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "object-store-operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(tenantNS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-claim"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "object-store-operator-" + opNS},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "object-store-operator", Namespace: tenantNS}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	forger := serviceAccountUser(tenantNS)
	// What a claim's reader asks (a SubjectAccessReview), in the tenant's
	// namespace and cluster-wide.
	may := func(user, ns string) bool {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: claim.Group, Resource: claim.Resource, Verb: claim.Verb}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	require.Eventually(t, func() bool { return may(forger, tenantNS) }, 10*time.Second, 50*time.Millisecond,
		"the RoleBinding grants the mark in the tenant's namespace")
	assert.False(t, may(forger, ""), "but not cluster-wide")
	assert.True(t, may(serviceAccountUser(opNS), ""), "the install's ServiceAccount holds it cluster-wide")

	holder := "tenant"
	_, err = admin.CoordinationV1().Leases(tenantNS).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: claim.LeaseName, Labels: map[string]string{claim.Label: "true"},
			Annotations: map[string]string{claim.NamespacesAnnotation: claim.All, claim.UserAnnotation: forger}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Started now, the install's claim is younger than the forged one,
	// which stays live (first seen, it counts as renewed for 30 s).
	op := runInstall(t, opNS)
	op.op.waitReady(t)
	tenantStore(t, tenantNS, "store")
	waitGenerated(t, tenantNS, "store")
	ok, body := op.op.readyz()
	assert.True(t, ok, "ready: %s", body)
	assert.Equal(t, 1.0, metricValue(t, op.op, "objectstore_operator_namespace_claim_held"))
}
