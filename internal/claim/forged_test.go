package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestATenantsForgedClaimRefusesNoInstall: a tenant allowed to write
// Leases in its own namespace (namespace admins commonly are) creates
// object-store-operator-claim there, labelled, claiming "*", and renews
// it; it names a ServiceAccount it made in its namespace (and bound to
// whatever Role it likes), or the install's own. The next time the
// install's claim is made again (watchNamespaces changed by a helm
// upgrade, or every replica down for 30 s) the forged claim is older and
// live, yet it refuses nothing: no ServiceAccount of the tenant's
// namespace holds the cluster-wide grant, and a claim naming a
// ServiceAccount of another namespace is not one. Each forged claim is
// reviewed once a Duration, not once a read.
func TestATenantsForgedClaimRefusesNoInstall(t *testing.T) {
	for _, user := range []string{"", installUser("tenant-a"), installUser("ops"), "system:serviceaccount:tenant-a"} {
		t.Run("user="+user, func(t *testing.T) {
			a := newAPI(t)
			ctx := t.Context()
			ops := a.keeper(t, "ops", "tenant-a")
			a.step(ctx, ops)
			a.step(ctx, ops)
			assert.NoError(t, ops.Ready())

			holder := "tenant"
			forged := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: "tenant-a",
					Labels: map[string]string{Label: "true"}, Annotations: map[string]string{NamespacesAnnotation: All}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
			}
			if user != "" {
				forged.Annotations[UserAnnotation] = user
			}
			_, err := a.client.CoordinationV1().Leases("tenant-a").Create(ctx, forged, metav1.CreateOptions{})
			require.NoError(t, err)
			renew := func() {
				l, err := a.client.CoordinationV1().Leases("tenant-a").Get(ctx, LeaseName, metav1.GetOptions{})
				if assert.NoError(t, err) {
					l.Annotations["touch"] = a.clock.Now().String()
					_, err = a.client.CoordinationV1().Leases("tenant-a").Update(ctx, l, metav1.UpdateOptions{})
					assert.NoError(t, err)
				}
			}
			a.clock.Step(time.Second)

			// A routine helm upgrade: the install now also watches
			// tenant-b; its claim is made again, younger than the forged one.
			upgraded := a.replica(t, "ops", "ops-replica-2", "tenant-a", "tenant-b")
			a.mu.Lock()
			a.reviews = 0
			a.mu.Unlock()
			for range 5 {
				renew()
				a.step(ctx, upgraded)
			}
			assert.NoError(t, upgraded.Ready(), "a Lease a tenant wrote in its own namespace refuses the install")
			a.mu.Lock()
			defer a.mu.Unlock()
			assert.LessOrEqual(t, a.reviews, 1, "SubjectAccessReviews over five reads within a Duration")
		})
	}
}
