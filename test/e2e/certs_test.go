package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	ctx := t.Context()
	cs, err := testCluster.Clientset()
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	names := serviceDNSNames(ns)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + names[2], Organization: []string{"system:nodes"}},
		DNSNames: names,
	}, key)
	require.NoError(t, err)
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-files-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2E",
	}}
	_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	var certPEM []byte
	require.Eventually(t, func() bool {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0
	}, 10*time.Second, 20*time.Millisecond)

	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}
