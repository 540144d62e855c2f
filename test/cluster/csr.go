package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IssueKubeletServingCert has kube-controller-manager's kubelet-serving
// signer issue a serving certificate for dnsNames (the first one also goes
// into the CN), approving the CSR as an admin would. It returns PEM.
func (c *Cluster) IssueKubeletServingCert(ctx context.Context, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	cs, err := c.Clientset()
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + dnsNames[0], Organization: []string{"system:nodes"}},
		DNSNames: dnsNames,
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CSR: %w", err)
	}
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "harness-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("create CSR: %w", err)
	}
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Harness", Message: "approved by the test harness",
	}}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("approve CSR %s: %w", csr.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err == nil && len(got.Status.Certificate) > 0 {
			keyDER, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, nil, fmt.Errorf("marshal key: %w", err)
			}
			return got.Status.Certificate, pemBlock("PRIVATE KEY", keyDER), nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("CSR %s not signed: %w", csr.Name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
