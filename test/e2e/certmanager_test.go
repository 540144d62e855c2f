package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/object-store-operator/operator/internal/testutil"
	"github.com/object-store-operator/operator/test/cluster"
)

// certManagerDir holds the real cert-manager controller and its CRDs (its
// README says how they were built: the module proxy cannot):
// $OSOP_CERT_MANAGER_DIR, else ../shared/tools/cert-manager-v1.21.1 beside
// the repository.
func certManagerDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("OSOP_CERT_MANAGER_DIR"); dir != "" {
		return dir
	}
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "..", "shared", "tools", "cert-manager-v1.21.1")
}

var certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// startCertManager installs cert-manager's CRDs (once per control plane)
// and runs its controller, without webhook or leader election, until the
// test ends; ClusterIssuers' Secrets live in clusterNS. Its log is printed
// if the test fails.
func startCertManager(t *testing.T, clusterNS string) {
	t.Helper()
	dir := certManagerDir(t)
	if _, err := os.Stat(filepath.Join(dir, "cert-manager-controller.xz")); err != nil {
		// ../shared beside the repository is where the project keeps what
		// the module proxy cannot build: a test that cannot run fails.
		t.Fatalf("the real cert-manager controller is not at %s (../shared/tools beside the repository, or OSOP_CERT_MANAGER_DIR): %v", dir, err)
	}
	out, err := kubectlErr(t, "create", "-f", filepath.Join(dir, "crds.yaml"))
	if err != nil && !strings.Contains(out, "AlreadyExists") {
		t.Fatalf("install cert-manager CRDs: %v: %s", err, out)
	}
	for _, crd := range []string{"certificates", "certificaterequests", "issuers", "clusterissuers", "orders", "challenges"} {
		group := "cert-manager.io"
		if crd == "orders" || crd == "challenges" {
			group = "acme.cert-manager.io"
		}
		kubectl(t, "wait", "--for=condition=Established", "crd/"+crd+"."+group, "--timeout=30s")
	}

	bin := filepath.Join(t.TempDir(), "cert-manager-controller")
	xz := exec.Command("xz", "-dc", filepath.Join(dir, "cert-manager-controller.xz"))
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	xz.Stdout = f
	require.NoError(t, xz.Run(), "decompress the cert-manager controller")
	require.NoError(t, f.Close())

	ports := freePorts(t, 2)
	logs := &testutil.LockedBuffer{}
	cmd := exec.Command(bin, "--kubeconfig", testCluster.Kubeconfig, "--leader-elect=false",
		"--cluster-resource-namespace="+clusterNS,
		fmt.Sprintf("--metrics-listen-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--internal-healthz-listen-address=127.0.0.1:%d", ports[1]))
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("cert-manager log (last 60 lines):\n%s", lastLines(logs.String(), 60))
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// certManagerCA writes a CA key pair (valid two years, so the seed's
// 8760h Certificate is not cut short) into Secret name of namespace ns,
// as a CA ClusterIssuer wants it, and returns its PEM.
func certManagerCA(t *testing.T, ns, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "seed test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * 8760 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	putNamedSecret(t, ns, name, map[string][]byte{
		"tls.crt": caPEM, "tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	})
	return caPEM
}

// certificateState is a cert-manager Certificate's status.revision and
// whether its Ready condition is True.
func certificateState(t *testing.T, ns, name string) (revision int64, ready bool) {
	t.Helper()
	u, err := dyn(t).Resource(certificateGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false
	}
	require.NoError(t, err)
	revision, _, _ = unstructured.NestedInt64(u.Object, "status", "revision")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			ready = true
		}
	}
	return revision, ready
}

// TestSeedCustomCertificateFlowFromADefaultInstallWithoutAFight runs the
// seed's four steps (docs/tls.md, "Switching to cert-manager") against
// the real cert-manager controller, from an operator running in its
// default autocert mode, then switches back to autocert. Step 1's
// Certificate names the Secret autocert already fills: cert-manager
// issues once into it, autocert leaves it alone (it says so in the log
// and a metric) and keeps serving its own certificate; no CSR is filed
// after Step 1, and the Certificate stays at revision 1. Before autocert
// recognised another issuer's certificate, the two re-issued over each
// other without end (141 CSRs and revision 136 in 45 s).
func TestSeedCustomCertificateFlowFromADefaultInstallWithoutAFight(t *testing.T) {
	// Not parallel: the cert-manager controller watches every namespace.
	ns := operatorNamespace(t)
	startCertManager(t, ns)
	caPEM := certManagerCA(t, ns, "seed-ca")
	issuer := "seed-ca-" + ns
	kubectlApply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata:
  name: %s
spec:
  ca:
    secretName: seed-ca
`, issuer))
	t.Cleanup(func() { _, _ = kubectlErr(t, "delete", "clusterissuer", issuer, "--ignore-not-found") })

	// A running default install: autocert has filled the Secret.
	csrs := recordCSRs(t, ns)
	op := startOperator(t, soloEnv(ns))
	autocertLeaf, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err, "autocert serves a kubelet-signed certificate")
	csrs.assertFiled(t, 1)

	// Step 1: the seed's Certificate, with the Secret autocert fills.
	kubectlApply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: operator-webhook-tls
  namespace: %[1]s
spec:
  secretName: object-store-operator-tls
  issuerRef:
    name: %[2]s
    kind: ClusterIssuer
  dnsNames:
    - object-store-operator
    - object-store-operator.%[1]s.svc
    - object-store-operator.%[1]s.svc.cluster.local
  duration: 8760h
  renewBefore: 720h
`, ns, issuer))
	// Ready (the readiness controller) and the revision (the issuing
	// controller) are written apart: wait for both.
	require.Eventually(t, func() bool {
		revision, ready := certificateState(t, ns, "operator-webhook-tls")
		return ready && revision >= 1
	}, 30*time.Second, 50*time.Millisecond, "cert-manager issues the Certificate")

	// Autocert says it stands aside, in the metric and the log (a fight
	// never gets there: each side re-issues instead).
	standsAside := assert.Eventually(t, func() bool {
		return counter(t, op, `objectstore_operator_autocert_foreign_secret{reason="cert_manager"}`) == 1
	}, 15*time.Second, 50*time.Millisecond, "autocert reports the Secret as another issuer's")
	revision, _ := certificateState(t, ns, "operator-webhook-tls")
	t.Logf("after Step 1: %d CSRs filed in all (1 before Step 1), Certificate at revision %d", csrs.filed(), revision)
	csrs.assertFiled(t, 1, "no CSR after Step 1")
	assert.Equal(t, int64(1), revision, "one issuance by cert-manager")
	if !standsAside || t.Failed() {
		t.FailNow()
	}
	line := op.waitDocumentedLine(t, "autocert will not overwrite Secret "+ns+"/"+autocertSecret,
		`"reason":"CertManagerSecret"`, "operator-webhook-tls",
		"OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+autocertSecret)
	assert.Contains(t, line, `"namespace":"`+ns+`"`)
	assert.Contains(t, line, `"name":"`+autocertSecret+`"`)
	still, err := servedLeaf(op, ns, nil)
	require.NoError(t, err)
	assert.Equal(t, autocertLeaf.SerialNumber, still.SerialNumber, "autocert keeps serving what it served")
	assert.True(t, op.ready())

	// Steps 2 and 3: the two env vars, and a restart.
	op.stop()
	op = startOperator(t, soloEnv(ns, "OPERATOR_AUTO_CERT_DISABLED=on", "OPERATOR_CUSTOM_TLS_SECRET_NAME="+autocertSecret))

	// Step 4: the log, and the listing with the CA pods trust.
	var loaded []string
	for _, l := range strings.Split(op.logs.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "custom certificate") && strings.Contains(l, "TLS") {
			loaded = append(loaded, l)
		}
	}
	require.NotEmpty(t, loaded, `the seed's grep -i "custom certificate\|TLS" finds the line`)
	assert.Contains(t, strings.Join(loaded, "\n"), "TLS custom certificate loaded")
	assert.Contains(t, strings.Join(loaded, "\n"), ns+"/"+autocertSecret)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	out, err := curl(op, serviceName+"."+ns+".svc.cluster.local", caFile)
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `"binaries"`, "HTTP 200 with the listing")

	revision, _ = certificateState(t, ns, "operator-webhook-tls")
	t.Logf("after Step 4: %d CSRs filed in all, Certificate at revision %d", csrs.filed(), revision)
	csrs.assertFiled(t, 1, "no CSR after Step 1")
	assert.Equal(t, int64(1), revision, "one issuance by cert-manager")

	// Back to autocert (docs/tls.md): the Certificate and its Secret
	// deleted, the two env vars removed, a restart; one CSR.
	kubectl(t, "delete", "certificate", "operator-webhook-tls", "-n", ns)
	kubectl(t, "delete", "secret", autocertSecret, "-n", ns)
	op.stop()
	op = startOperator(t, soloEnv(ns))
	back, err := servedLeaf(op, ns, testCluster.KubeletServingCA)
	require.NoError(t, err, "autocert serves a kubelet-signed certificate again")
	assert.NotEqual(t, autocertLeaf.SerialNumber, back.SerialNumber)
	csrs.assertFiled(t, 2, "one CSR for the switch back")
	assert.Zero(t, counter(t, op, `objectstore_operator_autocert_foreign_secret{reason="cert_manager"}`))
}

// kubectlApply applies manifest as a user would.
func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	bin, err := cluster.BinDir()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", testCluster.Kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl apply: %s", out)
}
