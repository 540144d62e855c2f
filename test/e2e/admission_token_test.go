package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/object-store-operator/operator/api/v1"
)

// TestAdmissionPolicyDeniesServiceAccountTokenSecrets: a Secret of type
// kubernetes.io/service-account-token naming a ServiceAccount has the
// token controller mint a long-lived token for it, which the operator may
// read back. Named, labelled and owned like a generated Secret, it is
// still denied for the operator's ServiceAccount by the policy (the
// operator writes only Opaque Secrets, and kubernetes.io/tls for its own
// certificate), in a tenant's namespace and in kube-system (owned by an
// ObjectStore that does not exist: the policy checks no uid). This
// control plane runs no legacy token controller, so the test shows the
// admission only.
func TestAdmissionPolicyDeniesServiceAccountTokenSecrets(t *testing.T) {
	ensureCRD(t)
	opNS, tenantNS := operatorNamespace(t), operatorNamespace(t)
	helm(t, "install", "osop", chartDir(t), "-n", opNS)
	sa := serviceAccountUser(opNS)
	waitForAdmissionPolicy(t, sa, tenantNS)
	applyYAML(t, objectStoreYAML(tenantNS, "tok", nil, nil, nil))
	u, err := dyn(t).Resource(apiv1.Resource).Namespace(tenantNS).Get(t.Context(), "tok", metav1.GetOptions{})
	require.NoError(t, err)
	// Gone before the next test: a cluster-wide install there would see
	// it in a namespace being deleted, and fail to write for it.
	t.Cleanup(func() {
		stores := dyn(t).Resource(apiv1.Resource).Namespace(tenantNS)
		_ = stores.Delete(context.Background(), "tok", metav1.DeleteOptions{})
		assert.Eventually(t, func() bool {
			_, err := stores.Get(context.Background(), "tok", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 20*time.Second, 50*time.Millisecond, "ObjectStore %s/tok deleted", tenantNS)
	})
	tokenIn := func(ns, uid string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: tok-generated
  namespace: %s
  labels:
    aistor.min.io/objectstore: tok
  annotations:
    kubernetes.io/service-account.name: default
  ownerReferences:
  - apiVersion: aistor.min.io/v1
    kind: ObjectStore
    name: tok
    uid: %s
    controller: true
type: kubernetes.io/service-account-token
`, ns, uid)
	}
	// In a tenant's namespace, owned by its real ObjectStore; and in
	// kube-system, owned by an ObjectStore that does not exist (the policy
	// checks no uid).
	for _, c := range []struct{ ns, uid string }{{tenantNS, string(u.GetUID())}, {"kube-system", "00000000-0000-0000-0000-000000000000"}} {
		out, err := kubectlAs(t, sa, tokenIn(c.ns, c.uid), "create", "-f", "-", "--dry-run=server")
		t.Logf("operator SA creates a service-account-token Secret in %s: %s", c.ns, strings.TrimSpace(out))
		if assert.Error(t, err, "a Secret minting a token for ServiceAccount %s/default is admitted for the operator's ServiceAccount", c.ns) {
			assert.Contains(t, out, "ValidatingAdmissionPolicy")
		}
	}
}
