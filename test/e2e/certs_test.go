package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const serviceName = "object-store-operator"

// serviceDNSNames are the names a pod uses to reach the operator's Service.
func serviceDNSNames(ns string) []string {
	return []string{
		serviceName,
		serviceName + "." + ns,
		serviceName + "." + ns + ".svc",
		serviceName + "." + ns + ".svc.cluster.local",
	}
}

// kubeletServingCertFiles has the control plane's kubelet-serving signer
// issue a certificate for the operator's Service names and writes it to
// tls.crt/tls.key in a temp dir, the way OLM or a mounted Secret would
// provide it.
func kubeletServingCertFiles(t *testing.T, ns string) (certFile, keyFile string) {
	t.Helper()
	names := serviceDNSNames(ns)
	certPEM, keyPEM, err := testCluster.IssueKubeletServingCert(t.Context(), append([]string{names[2]}, names...))
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	return certFile, keyFile
}
