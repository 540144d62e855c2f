package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// rbacUse is why the chart grants one verb on one resource: the call in
// the code that needs it. The file must contain the call, so removing the
// call without removing the grant fails TestEveryGrantedVerbIsCalled.
type rbacUse struct {
	file, call, why string
}

// rbacUses maps "<apiGroup>/<resource> <verb>" to the call that needs it.
// A verb the chart grants that is not here fails the test: add the call
// (and a row in docs/install.md) or drop the grant.
var rbacUses = map[string]rbacUse{
	// autocert
	"certificates.k8s.io/certificatesigningrequests create":          {"autocert/issuer.go", "CertificateSigningRequests().Create(", "file the serving certificate's CSR"},
	"certificates.k8s.io/certificatesigningrequests get":             {"autocert/issuer.go", "CertificateSigningRequests().Get(", "read the CSR once more to say why a wait ended"},
	"certificates.k8s.io/certificatesigningrequests list":            {"autocert/issuer.go", "CertificateSigningRequests().List(", "find leftover CSRs; WaitForCertificate's informer lists"},
	"certificates.k8s.io/certificatesigningrequests watch":           {"autocert/issuer.go", "csrutil.WaitForCertificate(", "WaitForCertificate watches the CSR through an informer"},
	"certificates.k8s.io/certificatesigningrequests delete":          {"autocert/issuer.go", "CertificateSigningRequests().Delete(", "delete the CSR once the attempt ends"},
	"certificates.k8s.io/certificatesigningrequests/approval update": {"autocert/issuer.go", "UpdateApproval(", "self-approval"},
	"certificates.k8s.io/signers approve":                            {"autocert/issuer.go", "UpdateApproval(", "the apiserver checks approve on the signer for an approval"},
	"/nodes list":                                                    {"cmd/operator/kube.go", "Core().V1().Nodes()", "the Node informer (platform of each tenant's binary) lists; EKS detection lists too"},
	"/nodes watch":                                                   {"cmd/operator/kube.go", "Core().V1().Nodes()", "the Node informer watches"},
	"/pods list":                                                     {"cmd/operator/kube.go", "Core().V1().Pods()", "the StatefulSet pod informer (where a tenant's pods run) lists"},
	"/pods watch":                                                    {"cmd/operator/kube.go", "Core().V1().Pods()", "the StatefulSet pod informer watches"},
	"/pods get":                                                      {"updates/resolve.go", "Pods(ns).Get(", "the Pod an admin endpoint's EndpointSlice names, checked to have that address"},
	"/pods delete":                                                   {"rollout/controller.go", "Pods(namespace).Delete(", "the rollout replaces a pod of a StatefulSet under OnDelete, one at a time"},
	"/services get":                                                  {"updates/resolve.go", "Services(target.namespace).Get(", "the Service an admin endpoint names (ExternalName is refused)"},
	"discovery.k8s.io/endpointslices list":                           {"updates/resolve.go", "EndpointSlices(target.namespace).List(", "the EndpointSlices of the Service an admin endpoint names"},
	"/configmaps get":                                                {"autocert/issuer.go", `ConfigMaps(i.cfg.Namespace).Get(ctx, "kube-root-ca.crt"`, "the cluster CA for the serving CA bundle"},
	"coordination.k8s.io/leases get":                                 {"cmd/operator/leader.go", "resourcelock.LeaseLock{", "leader election reads the Lease"},
	"coordination.k8s.io/leases create":                              {"cmd/operator/leader.go", "resourcelock.LeaseLock{", "leader election creates the Lease"},
	"coordination.k8s.io/leases update":                              {"cmd/operator/leader.go", "resourcelock.LeaseLock{", "leader election renews the Lease; the halt record (updates/halt.go) is rewritten"},
	"aistor.min.io/namespaceclaims list":                             {"internal/claim/claim.go", "NewFilteredDynamicInformer(cfg.Client, Resource", "the NamespaceClaim informer lists every install's claim"},
	"/namespaces list":                                               {"cmd/operator/kube.go", `WithResource("namespaces")`, "with a tenant label, the namespaces' metadata informer lists them"},
	"/namespaces watch":                                              {"cmd/operator/kube.go", `WithResource("namespaces")`, "and watches them"},
	"aistor.min.io/namespaceclaims watch":                            {"internal/claim/claim.go", "NewFilteredDynamicInformer(cfg.Client, Resource", "the NamespaceClaim informer watches"},
	// The ClusterTrustBundle (docs/trust.md)
	"certificates.k8s.io/clustertrustbundles create": {"trustbundle/publisher.go", ".Apply(ctx, p.name", "server-side apply creates the bundle when it is missing"},
	"certificates.k8s.io/clustertrustbundles patch":  {"trustbundle/publisher.go", ".Apply(ctx, p.name", "server-side apply of the bundle"},
	"certificates.k8s.io/clustertrustbundles list":   {"trustbundle/publisher.go", "NewFilteredDynamicInformer(", "the informer on the one bundle lists it by name"},
	"certificates.k8s.io/clustertrustbundles watch":  {"trustbundle/publisher.go", "NewFilteredDynamicInformer(", "the informer on the one bundle watches it by name"},
	"certificates.k8s.io/signers attest":             {"trustbundle/publisher.go", `"signerName": SignerName`, "a bundle with a signer name needs attest on it (ClusterTrustBundleAttest)"},
	"rbac.authorization.k8s.io/clusterroles get":     {"trustbundle/publisher.go", "ClusterRoles().Get(", "the owner's uid for the bundle's owner reference"},
	// ObjectStores
	"aistor.min.io/objectstores list":              {"cmd/operator/kube.go", "ForResource(apiv1.Resource)", "the ObjectStore informer lists"},
	"aistor.min.io/objectstores watch":             {"cmd/operator/kube.go", "ForResource(apiv1.Resource)", "the ObjectStore informer watches"},
	"aistor.min.io/objectstores/status patch":      {"status/status.go", ".ApplyStatus(", "conditions and the updater's fields by server-side apply"},
	"aistor.min.io/objectstores/finalizers update": {"mountsecret/sync.go", "metav1.NewControllerRef(store", "<name>-generated is owned with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)"},
	// Secrets
	"/secrets get":    {"internal/secretcache/reader.go", "Secrets(namespace).Get(", "referenced Secrets' data, the configuration and generated Secrets, pull Secrets"},
	"/secrets list":   {"cmd/operator/kube.go", `WithResource("secrets")`, "the metadata-only Secret informer lists"},
	"/secrets watch":  {"cmd/operator/kube.go", `WithResource("secrets")`, "the metadata-only Secret informer watches"},
	"/secrets create": {"mountsecret/sync.go", "Secrets(store.Namespace).Create(", "create <name>-generated (and autocert's Secret)"},
	"/secrets update": {"mountsecret/sync.go", "Secrets(store.Namespace).Update(", "rewrite <name>-generated (and autocert's Secret)"},
	// StatefulSets
	"apps/statefulsets list":  {"cmd/operator/kube.go", "Apps().V1().StatefulSets()", "the labelled StatefulSet informer lists (the controllers read its lister)"},
	"apps/statefulsets watch": {"cmd/operator/kube.go", "Apps().V1().StatefulSets()", "the labelled StatefulSet informer watches"},
	"apps/statefulsets patch": {"mountsecret/sync.go", "StatefulSets(s.Namespace).Patch(", "the restart annotation; the updater patches the minio image"},
	// Events: client-go's recorder creates an Event and patches its count
	// when it repeats; it never updates.
	"/events create": {"cmd/operator/kube.go", "typedcorev1.EventSinkImpl{", "Events on ObjectStores (core/v1 sink)"},
	"/events patch":  {"cmd/operator/kube.go", "typedcorev1.EventSinkImpl{", "a repeated Event's count"},
}

// chartRenders are the configurations whose RBAC the test reads: each
// grant appears in at least one.
var chartRenders = map[string]string{
	"default": "",
	"approval by an admin": `global:
  operator:
    extraEnv:
      - name: OPERATOR_AUTOCERT_APPROVE
        value: "off"
`,
	"signer set": `global:
  operator:
    extraEnv:
      - name: OPERATOR_CSR_SIGNER_NAME
        value: example.com/signer
`,
	"watched namespaces": `watchNamespaces: [tenant-a, tenant-b]
`,
	"watched namespaces, custom certificate": `watchNamespaces: [tenant-a]
global:
  operator:
    extraEnv:
      - name: OPERATOR_AUTO_CERT_DISABLED
        value: "on"
      - name: OPERATOR_CUSTOM_TLS_SECRET_NAME
        value: object-store-operator-tls
`,
	"custom certificate": `global:
  operator:
    extraEnv:
      - name: OPERATOR_AUTO_CERT_DISABLED
        value: "on"
      - name: OPERATOR_CUSTOM_TLS_SECRET_NAME
        value: object-store-operator-tls
`,
}

// renderRBAC runs helm template with values and returns its Roles and
// ClusterRoles.
func renderRBAC(t *testing.T, values string, args ...string) (cluster []rbacv1.ClusterRole, roles []rbacv1.Role) {
	t.Helper()
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(valuesFile, []byte(values), 0o600))
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "osop", filepath.Join("..", "..", "helm", "object-store-operator"),
		"-n", "ops", "-f", valuesFile, "--kube-version", chartKubeVersion}, args...)...)
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
			break
		}
		require.NoError(t, err)
		switch raw["kind"] {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &r))
			cluster = append(cluster, r)
		case "Role":
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &r))
			roles = append(roles, r)
		}
		raw = nil
	}
	return cluster, roles
}

func TestEveryGrantedVerbIsCalled(t *testing.T) {
	granted := map[string]bool{}
	for name, values := range chartRenders {
		cluster, roles := renderRBAC(t, values)
		var rules []rbacv1.PolicyRule
		for _, r := range cluster {
			rules = append(rules, r.Rules...)
		}
		for _, r := range roles {
			rules = append(rules, r.Rules...)
		}
		require.NotEmpty(t, rules, name)
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						key := g + "/" + res + " " + verb
						granted[key] = true
						_, ok := rbacUses[key]
						assert.True(t, ok, "%s: the chart grants %q, which no call in the code needs (rbacUses)", name, key)
					}
				}
			}
		}
	}
	keys := make([]string, 0, len(rbacUses))
	for k := range rbacUses {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		use := rbacUses[key]
		src, err := os.ReadFile(filepath.Join("..", "..", use.file))
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(src), use.call), "%s: %s no longer contains %q (%s)", key, use.file, use.call, use.why)
		assert.True(t, granted[key], "%s is in rbacUses but no rendering of the chart grants it", key)
	}
}
