// Package cluster starts a real Kubernetes control plane on loopback: etcd,
// kube-apiserver and kube-controller-manager built from the versions pinned
// in hack/tools. Tests use it through Main (one control plane per test
// package); `make run` uses it through hack/run.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/object-store-operator/operator/internal/testutil"
)

// ServiceAccountIssuer is the issuer of the control plane's service-account tokens.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// Options configure a control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Empty means the repository's bin/ (see BinDir).
	BinDir string
	// Dir is where state, certificates and logs go. It is wiped on start
	// and kept after Stop, for `make run`. Empty means a temporary
	// directory that Stop removes.
	Dir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// CRDs are files or directories of CustomResourceDefinitions to
	// install before kube-controller-manager starts.
	CRDs []string
	// ClusterTrustBundles serves certificates.k8s.io/v1beta1
	// ClusterTrustBundles and admits the clusterTrustBundle projected
	// volume: the ClusterTrustBundle and ClusterTrustBundleProjection
	// feature gates and the runtime config Kubernetes 1.33 to 1.36 need
	// (both are off by default there).
	ClusterTrustBundles bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// ClusterCA is the PEM of the CA that signs the apiserver's serving
	// certificate and client certificates; it is what kube-root-ca.crt holds
	// in a real cluster.
	ClusterCA []byte
	// KubeletServingCA is the PEM of the CA kube-controller-manager signs
	// kubernetes.io/kubelet-serving CSRs with. It differs from ClusterCA on
	// purpose, as it does on many real clusters.
	KubeletServingCA []byte
	// Dir holds the control plane's files, including one log per component.
	Dir string

	// AuditLog is the apiserver's audit log: the requests of the
	// ServiceAccounts in namespace AuditedNamespace, nothing else.
	AuditLog string

	etcdURL   string
	removeDir bool
	pidsFile  string
	watchdog  *exec.Cmd
	processes []*process
	log       io.Writer
	stopPods  context.CancelFunc
	// extraArgs are appended to a component's arguments, by name (what
	// Options turn on).
	extraArgs map[string][]string
}

// AuditedNamespace is the namespace whose ServiceAccounts' requests go to
// the audit log: a test runs the operator as one of them to count its
// requests.
const AuditedNamespace = "osop-audited"

const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:` + AuditedNamespace + `"]
- level: None
`

// Start brings up etcd, kube-apiserver and kube-controller-manager on free
// loopback ports and returns once the apiserver is ready. On error,
// everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("control plane binary %s missing in %s (run `make tools`): %w", b, binDir, err)
		}
	}

	c := &Cluster{log: opts.Log, Dir: opts.Dir, extraArgs: map[string][]string{}}
	if opts.ClusterTrustBundles {
		c.extraArgs["kube-apiserver"] = []string{
			"--feature-gates=ClusterTrustBundle=true,ClusterTrustBundleProjection=true",
			"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
		}
	}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "osop-cluster-"); err != nil {
			return nil, fmt.Errorf("create control plane directory: %w", err)
		}
		c.removeDir = true
	} else {
		if err := os.RemoveAll(c.Dir); err != nil {
			return nil, fmt.Errorf("clean %s: %w", c.Dir, err)
		}
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", c.Dir, err)
		}
	}
	defer func() {
		if err != nil {
			c.PrintLogTails(c.log, 30)
			c.Stop()
		}
	}()

	c.pidsFile = filepath.Join(c.Dir, "pids")
	wd, err := startWatchdog(c.Dir, c.pidsFile, c.removeDir)
	if err != nil {
		return nil, err
	}
	c.watchdog = wd

	files, err := c.writePKI()
	if err != nil {
		return nil, err
	}
	c.AuditLog = filepath.Join(c.Dir, "audit.log")
	auditPolicy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(auditPolicyYAML), 0o600); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	ports, err := testutil.FreePorts(4)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]

	start := time.Now()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	c.etcdURL = etcdURL
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	if err := c.run("etcd", filepath.Join(binDir, "etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Test data is thrown away: durability only costs time here.
		"--unsafe-no-fsync",
		"--log-level=warn",
	); err != nil {
		return nil, err
	}

	if err := c.run("kube-apiserver", filepath.Join(binDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		// The "kubernetes" Service cannot point at a loopback address.
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(c.Dir, "apiserver"),
		"--tls-cert-file="+files.apiserverCert,
		"--tls-private-key-file="+files.apiserverKey,
		"--client-ca-file="+files.clusterCA,
		"--authorization-mode=RBAC",
		// What hardened clusters (OpenShift among them) enable on top of the
		// defaults: an owner reference that blocks deletion needs update on
		// the owner's finalizers.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--service-account-issuer="+ServiceAccountIssuer,
		"--api-audiences="+ServiceAccountIssuer,
		"--service-account-key-file="+files.saPub,
		"--service-account-signing-key-file="+files.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		"--audit-policy-file="+auditPolicy,
		"--audit-log-path="+c.AuditLog,
		"--audit-log-format=json",
		"--profiling=false",
		"--v=1",
	); err != nil {
		return nil, err
	}

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.Config = &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ClusterCA,
			CertData: files.adminCertPEM,
			KeyData:  files.adminKeyPEM,
		},
		QPS:   1000,
		Burst: 2000,
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Config); err != nil {
		return nil, err
	}
	kcmKubeconfig := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	kcmConfig := rest.CopyConfig(c.Config)
	kcmConfig.CertData, kcmConfig.KeyData = files.kcmCertPEM, files.kcmKeyPEM
	if err := writeKubeconfig(kcmKubeconfig, kcmConfig); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, "kube-apiserver", server+"/readyz", c.Config); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.log, "kube-apiserver ready at %s after %s\n", server, time.Since(start).Round(time.Millisecond))
	if err := c.installCRDs(ctx, opts.CRDs); err != nil {
		return nil, err
	}

	if err := c.run("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+kcmKubeconfig,
		"--authentication-kubeconfig="+kcmKubeconfig,
		"--authorization-kubeconfig="+kcmKubeconfig,
		"--controllers=csrsigning,garbagecollector,namespace,root-ca-cert-publisher,serviceaccount,statefulset",
		"--root-ca-file="+files.clusterCA,
		"--cluster-signing-kubelet-serving-cert-file="+files.kubeletCA,
		"--cluster-signing-kubelet-serving-key-file="+files.kubeletCAKey,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir="+filepath.Join(c.Dir, "kube-controller-manager"),
		"--v=1",
	); err != nil {
		return nil, err
	}
	insecure := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", kcmPort), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if err := c.waitReady(ctx, "kube-controller-manager", insecure.Host+"/healthz", insecure); err != nil {
		return nil, err
	}
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	driverCtx, stopDriver := context.WithCancel(context.Background())
	c.stopPods = stopDriver
	if err := (&podDriver{client: cs, log: c.log}).run(driverCtx); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.log, "control plane ready after %s (files and logs in %s)\n", time.Since(start).Round(time.Millisecond), c.Dir)
	return c, nil
}

// Stop terminates the components in reverse order and, for a temporary
// directory, removes their files. It is safe to call more than once.
func (c *Cluster) Stop() {
	if c.stopPods != nil {
		c.stopPods()
	}
	for i := len(c.processes) - 1; i >= 0; i-- {
		c.processes[i].stop(10 * time.Second)
	}
	c.processes = nil
	if err := stopWatchdog(c.watchdog); err != nil {
		fmt.Fprintln(c.log, err)
	}
	c.watchdog = nil
	if c.removeDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			fmt.Fprintf(c.log, "remove %s: %v\n", c.Dir, err)
		}
	}
}

// PrintLogTails writes the last n lines of every component's log to w.
func (c *Cluster) PrintLogTails(w io.Writer, n int) {
	for _, p := range c.processes {
		fmt.Fprintf(w, "--- control plane: last %d lines of %s ---\n%s\n", n, filepath.Base(p.logPath), tail(p.logPath, n))
	}
}

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("admin clientset: %w", err)
	}
	return cs, nil
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount namespace/name with a token from the TokenRequest API, so
// a process can run with exactly the rights RBAC gives that account.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, *rest.Config, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", nil, err
	}
	expiration := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	cfg := &rest.Config{
		Host:            c.Config.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.ClusterCA},
	}
	path := filepath.Join(c.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	if err := writeKubeconfig(path, cfg); err != nil {
		return "", nil, err
	}
	return path, cfg, nil
}

func (c *Cluster) run(name, binary string, args ...string) error {
	args = append(args, c.extraArgs[name]...)
	p, err := startProcess(name, binary, filepath.Join(c.Dir, name+".log"), args)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, p)
	return c.recordPID(p)
}

// component returns the running process called name.
func (c *Cluster) component(name string) *process {
	for _, p := range c.processes {
		if p.name == name {
			return p
		}
	}
	return nil
}

// restart starts the stopped component name again with the same binary,
// flags and data.
func (c *Cluster) restart(name string) error {
	for i, old := range c.processes {
		if old.name != name {
			continue
		}
		p, err := startProcess(name, old.binary, old.logPath, old.args)
		if err != nil {
			return err
		}
		c.processes[i] = p
		return c.recordPID(p)
	}
	return fmt.Errorf("no component %s", name)
}

// Outage stops kube-apiserver and etcd, runs during while both are down,
// starts etcd again and compacts its history to the current revision, then
// starts the apiserver again; it returns once the apiserver is ready.
// After the compaction no watch can resume where it stopped: every client
// gets 410 Gone and lists again, as after a long outage in production.
func (c *Cluster) Outage(ctx context.Context, during func()) error {
	c.component("kube-apiserver").stop(10 * time.Second)
	c.component("etcd").stop(10 * time.Second)
	during()
	if err := c.restart("etcd"); err != nil {
		return err
	}
	if err := c.compactEtcd(ctx); err != nil {
		return err
	}
	if err := c.restart("kube-apiserver"); err != nil {
		return err
	}
	return c.waitReady(ctx, "kube-apiserver", c.Config.Host+"/readyz", c.Config)
}

// compactEtcd compacts etcd to its current revision through its JSON
// gateway (no etcd client library needed).
func (c *Cluster) compactEtcd(ctx context.Context) error {
	post := func(path, body string) (map[string]any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("etcd %s: %s: %w", path, resp.Status, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("etcd %s: %s: %v", path, resp.Status, out)
		}
		return out, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := post("/v3/kv/range", `{"key":"AA=="}`)
		if err == nil {
			header, _ := out["header"].(map[string]any)
			rev, _ := header["revision"].(string)
			if rev == "" {
				return fmt.Errorf("etcd revision not in %v", out)
			}
			_, err = post("/v3/kv/compaction", `{"revision":"`+rev+`","physical":true}`)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not back: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) recordPID(p *process) error {
	f, err := os.OpenFile(c.pidsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("record pid of %s: %w", p.name, err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("record pid of %s: %w", p.name, err)
	}
	return nil
}

// waitReady polls url until it answers 200, the process dies, or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, name, url string, cfg *rest.Config) error {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("%s client: %w", name, err)
	}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	p := c.component(name)
	var last error
	for {
		if exited, err := p.exited(); exited {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s readiness request: %w", name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last answer: %v)", name, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type pkiFiles struct {
	clusterCA, apiserverCert, apiserverKey string
	kubeletCA, kubeletCAKey                string
	saKey, saPub                           string
	adminCertPEM, adminKeyPEM              []byte
	kcmCertPEM, kcmKeyPEM                  []byte
}

func (c *Cluster) writePKI() (pkiFiles, error) {
	var f pkiFiles
	clusterCA, err := newAuthority("osop-test-cluster-ca")
	if err != nil {
		return f, err
	}
	kubeletCA, err := newAuthority("osop-test-kubelet-serving-ca")
	if err != nil {
		return f, err
	}
	c.ClusterCA, c.KubeletServingCA = clusterCA.pem, kubeletCA.pem

	apiCert, apiKey, err := clusterCA.issue("kube-apiserver", nil,
		[]string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return f, err
	}
	if f.adminCertPEM, f.adminKeyPEM, err = clusterCA.issue("osop-admin", []string{"system:masters"}, nil); err != nil {
		return f, err
	}
	// The garbage collector lists every resource type; system:masters keeps
	// the harness independent of the bootstrap roles' exact contents.
	if f.kcmCertPEM, f.kcmKeyPEM, err = clusterCA.issue("system:kube-controller-manager", []string{"system:masters"}, nil); err != nil {
		return f, err
	}
	kubeletKey, err := kubeletCA.keyPEM()
	if err != nil {
		return f, err
	}
	saKey, saPub, err := serviceAccountKey()
	if err != nil {
		return f, err
	}
	pki := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return f, fmt.Errorf("create %s: %w", pki, err)
	}
	f.clusterCA = filepath.Join(pki, "cluster-ca.crt")
	f.apiserverCert = filepath.Join(pki, "apiserver.crt")
	f.apiserverKey = filepath.Join(pki, "apiserver.key")
	f.kubeletCA = filepath.Join(pki, "kubelet-serving-ca.crt")
	f.kubeletCAKey = filepath.Join(pki, "kubelet-serving-ca.key")
	f.saKey = filepath.Join(pki, "sa.key")
	f.saPub = filepath.Join(pki, "sa.pub")
	return f, writeFiles(map[string][]byte{
		f.clusterCA:     clusterCA.pem,
		f.apiserverCert: apiCert,
		f.apiserverKey:  apiKey,
		f.kubeletCA:     kubeletCA.pem,
		f.kubeletCAKey:  kubeletKey,
		f.saKey:         saKey,
		f.saPub:         saPub,
	})
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// BinDir finds the repository's bin/ directory by walking up from the
// working directory to the folder that holds hack/tools/go.mod.
func BinDir() (string, error) {
	if dir := os.Getenv("OSOP_BIN_DIR"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot is the directory that holds hack/tools/go.mod, found by walking
// up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (with hack/tools/go.mod) not found above the working directory")
		}
		dir = parent
	}
}
