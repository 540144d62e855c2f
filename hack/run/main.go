// Command run is `make run`: it starts the pinned control plane under
// .local/, prepares the operator namespace, runs the operator in the
// foreground against it, starts a demo tenant (the docs' example tenant,
// docs/examples/tenant.yaml, its MinIO on loopback running the older
// release) and prints the curl a pod would
// run and the kubectl command that updates the tenant in place. Ctrl-C
// stops everything it started.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/test/cluster"
)

const (
	namespace   = "object-store-operator"
	serviceName = "object-store-operator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	// OSOP_LOCAL_DIR and OSOP_OPERATOR let the end-to-end test run this
	// program without touching a developer's .local/ or bin/.
	local := envOr("OSOP_LOCAL_DIR", filepath.Join(root, ".local"))
	operatorBin := envOr("OSOP_OPERATOR", filepath.Join(root, "bin", "operator"))
	port := "4221"
	if addr := os.Getenv("OPERATOR_UPGRADE_ADDRESS"); addr != "" {
		port = addr[strings.LastIndex(addr, ":")+1:]
	}
	c, err := cluster.Start(ctx, cluster.Options{
		Dir: filepath.Join(local, "cluster"), Log: os.Stdout,
		CRDs: []string{filepath.Join(root, "helm", "object-store-operator", "crds")},
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the control plane")
		c.Stop()
	}()

	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	host := fmt.Sprintf("%s.%s.svc.cluster.local", serviceName, namespace)
	caFile := filepath.Join(c.Dir, "pki", "kubelet-serving-ca.crt")
	updateDir := filepath.Join(local, "updates")
	d, err := prepareDemo(root, local, updateDir)
	if err != nil {
		return fmt.Errorf("demo tenant: %w", err)
	}
	defer d.close()
	for _, ns := range []string{namespace, d.ex.namespace} {
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}

	// The operator files its own kubelet-serving CSR. The local signer's CA
	// is not the cluster CA (as on many clusters), so tell the operator
	// which CA pods must trust, as an SRE would.
	_, err = cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-serving-ca"},
		Data:       map[string][]byte{"ca.crt": c.KubeletServingCA},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret kubelet-serving-ca: %w", err)
	}

	op := exec.Command(operatorBin)
	op.Env = append(os.Environ(),
		"KUBECONFIG="+c.Kubeconfig,
		"OPERATOR_NAMESPACE="+namespace,
		"OPERATOR_UPDATE_DIR="+updateDir,
		"OPERATOR_SERVING_CA_SECRET=kubelet-serving-ca",
		// The demo's binaries are signed with make run's own key, and its
		// MinIO reaches the upgrade server on loopback (autocert then asks
		// for that address too).
		"OPERATOR_MINISIGN_PUBKEYS="+d.pub.String(),
		"OPERATOR_UPDATE_URL=https://127.0.0.1:"+port+"/webhook/v1/update",
		// The demo MinIO's admin API is on loopback too, which a tenant
		// may name only when the platform allows it.
		"OPERATOR_ALLOWED_UPDATE_ENDPOINTS=127.0.0.0/8",
	)
	op.Stdout, op.Stderr = os.Stdout, os.Stderr
	// Its own process group: Ctrl-C reaches it through us, after which the
	// control plane is stopped in order.
	op.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := op.Start(); err != nil {
		return fmt.Errorf("start operator: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Wait() }()

	kubectl := filepath.Join(root, "bin", "kubectl")
	apply := func(manifest string) error {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply: %v: %s", err, out)
		}
		return nil
	}
	if err := d.createTenant(ctx, cs, apply); err != nil {
		return fmt.Errorf("demo tenant: %w", err)
	}
	if err := d.startMinIO(ctx, cs, local); err != nil {
		return fmt.Errorf("demo tenant: %w", err)
	}

	fmt.Printf(`
The operator is running against the local control plane (Ctrl-C stops everything).
  kubectl:  %s --kubeconfig %s get ns
  binaries: put minio.<RELEASE>, .sha256sum and .minisig into %s[/<os>-<arch>/],
            or create an ObjectStore with spec.image (docs/binaries.md)
  certs:    an ObjectStore with spec.certificates gets <name>-generated (docs/mount-secret.md)
  metrics:  curl localhost:8080/metrics
  a pod would run:
    curl --cacert %s --resolve %s:%s:127.0.0.1 https://%s:%s/webhook/v1/update

The demo tenant: %s applied (its image and admin endpoint on loopback), its MinIO %s on https://127.0.0.1:%d (log: %s), ObjectStore %s/%s.
  watch it:          %[1]s --kubeconfig %[2]s get objectstore -n %[13]s -w
  update in place:   %[1]s --kubeconfig %[2]s patch objectstore %[14]s -n %[13]s --type merge -p '{"spec":{"image":"%[15]s"}}'

`, kubectl, c.Kubeconfig, updateDir, caFile, host, port, host, port,
		examplePath, d.older, d.minioPort, filepath.Join(local, "minio.log"), d.ex.namespace, d.ex.name, d.newImage)

	select {
	case err := <-done:
		return fmt.Errorf("operator exited: %w", err)
	case <-ctx.Done():
	}
	_ = op.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = op.Process.Kill()
		<-done
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
