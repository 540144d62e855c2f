package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/object-store-operator/operator/autocert"
	"github.com/object-store-operator/operator/internal/claim"
)

const autocertSecret = "object-store-operator-tls"

func adminClient(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := testCluster.Clientset()
	require.NoError(t, err)
	return cs
}

// operatorNamespace creates a namespace for one test's operator.
func operatorNamespace(t testing.TB) string {
	t.Helper()
	cs := adminClient(t)
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "osop-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		forgetClaim(t, ns.Name)
	})
	// The ServiceAccount admission plugin refuses a Pod of a namespace
	// whose default ServiceAccount the controller has not made yet (a CI
	// run lost TestChartInstallsAndItsRBACIsEnoughAndNoMore to it), as
	// it would a user's first Pod there.
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the default ServiceAccount of namespace %s", ns.Name)
	return ns.Name
}

// forgetClaim deletes the NamespaceClaim of an install in ns, as helm
// uninstall would: claims are cluster-scoped and outlive a deleted
// namespace, and a chart installed without watchNamespaces claims every
// namespace, which would refuse every later install of the package.
func forgetClaim(t testing.TB, ns string) {
	d, err := dynamic.NewForConfig(testCluster.Config)
	if err == nil {
		_ = d.Resource(claim.Resource).Delete(context.Background(), ns, metav1.DeleteOptions{})
	}
}

// k8sEnv is the environment of an operator in namespace ns, with the admin
// kubeconfig (the chart's RBAC is exercised in the Helm tests).
func k8sEnv(ns string, extra ...string) []string {
	return append([]string{
		"KUBECONFIG=" + testCluster.Kubeconfig,
		"OPERATOR_NAMESPACE=" + ns,
		"OPERATOR_UPDATE_DIR=" + filepath.Join(os.TempDir(), "osop-e2e-updates-"+ns),
	}, extra...)
}

// soloEnv is k8sEnv for an operator that reconciles no ObjectStore but
// those of its own namespace (none): a test that runs it may run in
// parallel with tests whose tenants it would otherwise act on.
func soloEnv(ns string, extra ...string) []string {
	return k8sEnv(ns, append([]string{"OPERATOR_WATCH_NAMESPACES=" + ns}, extra...)...)
}

// operatorCSRs lists the CSRs autocert filed for namespace ns.
func operatorCSRs(t *testing.T, ns string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := adminClient(t).CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{
		LabelSelector: autocert.ManagedByLabel + "=" + autocert.ManagedByValue,
	})
	require.NoError(t, err)
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if strings.HasPrefix(c.Name, autocert.ManagedByValue+"-"+ns+"-") {
			out = append(out, c)
		}
	}
	return out
}

// csrRecorder records the CSRs autocert files for a namespace, from a
// watch started before the operator: the operator deletes each CSR once
// its attempt ends, so a listing afterwards finds none.
type csrRecorder struct {
	mu    sync.Mutex
	names map[string]bool
}

func recordCSRs(t *testing.T, ns string) *csrRecorder {
	t.Helper()
	w, err := adminClient(t).CertificatesV1().CertificateSigningRequests().Watch(t.Context(), metav1.ListOptions{
		LabelSelector: autocert.NamespaceLabel + "=" + ns,
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	r := &csrRecorder{names: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			if c, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok && ev.Type == watch.Added {
				r.mu.Lock()
				r.names[c.Name] = true
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// filed is how many CSRs were created.
func (r *csrRecorder) filed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.names)
}

// assertFiled asserts that n CSRs were created, once the watch delivered
// the n-th: its events lag the API under load, and a test that looked
// right after the certificate was served saw one CSR short (CI).
func (r *csrRecorder) assertFiled(t *testing.T, n int, msgAndArgs ...any) {
	t.Helper()
	assert.Eventually(t, func() bool { return r.filed() >= n }, 10*time.Second, 10*time.Millisecond, msgAndArgs...)
	assert.Equal(t, n, r.filed(), msgAndArgs...)
}

// waitNoCSRLeft waits until every CSR the operator filed for ns is deleted.
func waitNoCSRLeft(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(operatorCSRs(t, ns)) == 0 }, 10*time.Second, 20*time.Millisecond,
		"CSRs the operator no longer needs are deleted")
}

// servedLeaf does a TLS handshake with the operator as a pod would, for the
// Service name in namespace ns, trusting roots (nil: no verification).
func servedLeaf(op *operator, ns string, roots []byte) (*x509.Certificate, error) {
	cfg := &tls.Config{ServerName: serviceName + "." + ns + ".svc.cluster.local", InsecureSkipVerify: roots == nil}
	if roots != nil {
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(roots)
	}
	conn, err := tls.Dial("tcp", op.upgradeAddr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func secretLeaf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(s.Data["tls.crt"])
	require.NotNil(t, block)
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return leaf
}

func TestAutocertColdStartThenRestartReusesTheSecret(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	csrs := recordCSRs(t, ns)
	start := time.Now()
	op := startOperator(t, soloEnv(ns))
	t.Logf("operator start -> kubelet-signed certificate served: %s", time.Since(start).Round(time.Millisecond))

	leaf, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err, "the served certificate verifies against the kubelet-serving CA for the service name")
	assert.Equal(t, []string{"system:nodes"}, leaf.Subject.Organization)
	csrs.assertFiled(t, 1, "exactly one CSR")
	waitNoCSRLeft(t, ns)

	secret, err := adminClient(t).CoreV1().Secrets(ns).Get(t.Context(), autocertSecret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, autocert.ManagedByValue, secret.Labels[autocert.ManagedByLabel])
	assert.Equal(t, corev1.SecretTypeTLS, secret.Type)
	assert.NotEmpty(t, secret.Data["tls.key"])
	assert.Equal(t, testCluster.ClusterCA, secret.Data["ca.crt"], "no chain in the CSR status: the cluster CA (kube-root-ca.crt)")
	assert.Equal(t, leaf.SerialNumber, secretLeaf(t, secret).SerialNumber)

	// The harness's kubelet CA is not the cluster CA: pods given ca.crt
	// would not trust the certificate, and the log must say so.
	op.waitLog(t, "x509: certificate signed by unknown authority")
	op.waitLog(t, "OPERATOR_SERVING_CA_SECRET")

	metrics := string(get(t, http.DefaultClient, "http://"+op.metricsAddr+"/metrics"))
	assert.Contains(t, metrics, `objectstore_operator_csr_total{outcome="issued"} 1`)
	assert.Contains(t, metrics, `workqueue_adds_total{name="autocert"}`, "client-go's workqueue metrics are exported")
	assert.Contains(t, metrics, `workqueue_depth{name="mountsecret"}`)
	assert.Contains(t, metrics, `objectstore_operator_serving_certificate_source{source="autocert certificate"} 1`)
	assert.Contains(t, metrics, fmt.Sprintf("objectstore_operator_serving_certificate_expiry_timestamp_seconds %s",
		strconv.FormatFloat(float64(leaf.NotAfter.Unix()), 'g', -1, 64)))

	caFile := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	require.NoError(t, os.WriteFile(caFile, testCluster.KubeletServingCA, 0o600))
	host := serviceName + "." + ns + ".svc.cluster.local"
	out, err := curl(op, host, caFile)
	require.NoError(t, err, "%s", out)

	op.stop()
	again := startOperator(t, soloEnv(ns))
	reused, err := servedLeaf(again, ns, testCluster.KubeletServingCA)
	require.NoError(t, err)
	assert.Equal(t, leaf.SerialNumber, reused.SerialNumber, "restart serves the stored certificate")
	csrs.assertFiled(t, 1, "no new CSR on restart")
}

func TestAutocertRenewsWithoutAFailedHandshake(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	// The signer issues exactly the requested 10 min; renewing 9m57s before
	// expiry renews about every 3 s.
	op := startOperator(t, soloEnv(ns, "OPERATOR_AUTOCERT_EXPIRATION=10m", "OPERATOR_AUTOCERT_RENEW_BEFORE=9m57s"))
	first, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err)

	c := op.newClient(t, testCluster.KubeletServingCA, 1)
	c.Transport.(*http.Transport).DisableKeepAlives = true // a new handshake per request
	url := "https://" + serviceName + "." + ns + ".svc.cluster.local/webhook/v1/update"
	serials := map[string]bool{first.SerialNumber.String(): true}
	var requests, failures int
	deadline := time.Now().Add(30 * time.Second)
	for len(serials) < 3 && time.Now().Before(deadline) {
		requests++
		resp, err := c.Get(url)
		if err != nil {
			failures++
			t.Logf("request %d: %v", requests, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failures++
		}
		serials[resp.TLS.PeerCertificates[0].SerialNumber.String()] = true
	}
	assert.GreaterOrEqual(t, len(serials), 3, "two renewals served without a restart")
	assert.Zero(t, failures, "%d of %d requests failed across the swaps", failures, requests)
	t.Logf("%d requests across %d certificates, %d failures", requests, len(serials), failures)
}

func TestAutocertDeniedCSRIsExplainedAndRetried(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	op := launchOperator(t, soloEnv(ns, "OPERATOR_AUTOCERT_APPROVE=off"))
	cs := adminClient(t)
	var denied atomic.Value
	require.Eventually(t, func() bool {
		csrs := operatorCSRs(t, ns)
		if len(csrs) == 0 {
			return false
		}
		csr := csrs[0]
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "PolicyDenied", Message: "not on the allow list",
		})
		_, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), csr.Name, &csr, metav1.UpdateOptions{})
		denied.Store(csr.Name)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	name := denied.Load().(string)
	require.Eventually(t, func() bool { return counter(t, op, `objectstore_operator_csr_total{outcome="denied"}`) >= 1 }, 10*time.Second, 20*time.Millisecond)
	// docs/troubleshooting.md: grep "autocert could not get a serving certificate".
	line := op.waitDocumentedLine(t, "autocert could not get a serving certificate", "CSR "+name+" was denied")
	assert.Contains(t, line, `"csr":"`+name+`"`)
	assert.Contains(t, line, `"signer":"kubernetes.io/kubelet-serving"`)
	assert.Contains(t, line, "not on the allow list")
	assert.Contains(t, line, "OPERATOR_CUSTOM_TLS_SECRET_NAME", "the remedy")
	assert.True(t, op.alive(), "a denied CSR never stops the operator")
	require.Eventually(t, func() bool {
		_, err := cs.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 20*time.Millisecond, "the denied CSR is deleted; the next attempt files its own")
	assert.False(t, op.ready(), "/readyz says no certificate is served")
}

func TestAutocertSignerThatNeverSignsTimesOut(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	op := launchOperator(t, soloEnv(ns, "OPERATOR_CSR_SIGNER_NAME=example.com/nobody", "OPERATOR_AUTOCERT_TIMEOUT=2s"))
	require.Eventually(t, func() bool { return counter(t, op, `objectstore_operator_csr_total{outcome="timeout"}`) >= 1 }, 15*time.Second, 50*time.Millisecond)
	// docs/troubleshooting.md: grep "autocert could not get a serving certificate".
	line := op.waitDocumentedLine(t, "autocert could not get a serving certificate", "not signed within 2s")
	assert.Contains(t, line, "for signer example.com/nobody")
	assert.Contains(t, line, "approved but not signed")
	assert.True(t, op.alive())
	assert.False(t, op.ready())
}

func TestServingCASecretGivesPodsTheRightCA(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	// docs/tls.md's command.
	caFile := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	require.NoError(t, os.WriteFile(caFile, testCluster.KubeletServingCA, 0o600))
	kubectl(t, "create", "secret", "generic", "kubelet-serving-ca", "-n", ns, "--from-file=ca.crt="+caFile)
	op := startOperator(t, soloEnv(ns, "OPERATOR_SERVING_CA_SECRET=kubelet-serving-ca"))

	secret, err := adminClient(t).CoreV1().Secrets(ns).Get(t.Context(), autocertSecret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, testCluster.KubeletServingCA, secret.Data["ca.crt"])
	op.waitLog(t, "TLS autocert certificate loaded") // written after the trust check
	assert.NotContains(t, op.logs.String(), "x509: certificate signed by unknown authority")
}

func curl(op *operator, host, caFile string) ([]byte, error) {
	return execOutput("curl", "-sS", "--fail", "--cacert", caFile,
		"--resolve", host+":"+op.port()+":127.0.0.1", "https://"+host+":"+op.port()+"/webhook/v1/update")
}

// TestAutocertApprovalByAnAdmin is docs/troubleshooting.md's flow with
// OPERATOR_AUTOCERT_APPROVE=off: an admin approves with kubectl.
func TestAutocertApprovalByAnAdmin(t *testing.T) {
	t.Parallel()
	ns := operatorNamespace(t)
	op := launchOperator(t, soloEnv(ns, "OPERATOR_AUTOCERT_APPROVE=off"))
	var name string
	require.Eventually(t, func() bool {
		if csrs := operatorCSRs(t, ns); len(csrs) > 0 {
			name = csrs[0].Name
		}
		return name != ""
	}, 10*time.Second, 20*time.Millisecond)
	op.waitLog(t, "kubectl certificate approve "+name) // the log tells the admin what to run
	assert.Contains(t, kubectl(t, "get", "csr", "-l", "app.kubernetes.io/managed-by=object-store-operator"),
		name, "docs/troubleshooting.md's listing finds the pending CSR")
	assert.False(t, op.ready())
	kubectl(t, "certificate", "approve", name)
	op.waitReady(t)
	_, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	assert.NoError(t, err)
	waitNoCSRLeft(t, ns)
}
