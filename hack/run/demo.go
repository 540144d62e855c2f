package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/test/cluster"
)

// The demo tenant `make run` starts: the example tenant of the docs
// (docs/examples/tenant.yaml) applied with an image (in a registry on
// loopback) that holds the older of the two releases `make tools` builds,
// and a single-node MinIO on loopback running that release with the
// example's credentials and the generated Secret's certificates, in place
// of its pods (the local control plane runs no kubelet). A second image
// holds the newer release: changing the ObjectStore's image to it updates
// that MinIO in place.
type demo struct {
	ex                 *example
	key                minisign.PrivateKey
	pub                minisign.PublicKey
	registryCA         []byte
	oldImage, newImage string
	older, newer       string
	minioPort          int
	stop               []func()
}

// prepareDemo makes the signing key (kept in local/ across runs), starts the
// registry with both images, and seeds the store with the newer release so
// the first curl lists a real binary.
func prepareDemo(root, local, updateDir string) (*demo, error) {
	d := &demo{}
	var err error
	if d.ex, err = loadExample(root); err != nil {
		return nil, err
	}
	if d.older, d.newer, err = cluster.MinIOReleases(); err != nil {
		return nil, err
	}
	if d.pub, d.key, err = loadOrMakeKey(filepath.Join(local, "minisign.key")); err != nil {
		return nil, err
	}
	var bins [2][]byte
	for i, r := range []string{d.older, d.newer} {
		path, err := cluster.MinIOBinary(r)
		if err != nil {
			return nil, err
		}
		if bins[i], err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	oldBin, newBin := bins[0], bins[1]
	if err := d.seed(updateDir, newBin); err != nil {
		return nil, err
	}
	host, err := d.startRegistry()
	if err != nil {
		return nil, err
	}
	if d.oldImage, err = d.push(host, d.older, oldBin); err != nil {
		return nil, err
	}
	if d.newImage, err = d.push(host, d.newer, newBin); err != nil {
		return nil, err
	}
	return d, nil
}

func loadOrMakeKey(path string) (minisign.PublicKey, minisign.PrivateKey, error) {
	var priv minisign.PrivateKey
	if b, err := os.ReadFile(path); err == nil && priv.UnmarshalText(b) == nil {
		return priv.Public().(minisign.PublicKey), priv, nil
	}
	pub, priv, err := minisign.GenerateKey(rand.Reader)
	if err != nil {
		return pub, priv, err
	}
	text, err := priv.MarshalText()
	if err != nil {
		return pub, priv, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return pub, priv, err
	}
	return pub, priv, os.WriteFile(path, text, 0o600)
}

// sign makes a prehashed signature, as `minisign -S` does.
func (d *demo) sign(content []byte) []byte {
	r := minisign.NewReader(bytes.NewReader(content))
	_, _ = io.Copy(io.Discard, r)
	return r.SignWithComments(d.key, "file:minio", "signed by make run's key")
}

// seed writes the newer release into the store the way MinIO publishes it.
func (d *demo) seed(updateDir string, bin []byte) error {
	dir := filepath.Join(updateDir, "linux-amd64")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := "minio." + d.newer
	sum := sha256.Sum256(bin)
	for file, content := range map[string][]byte{
		name:                bin,
		name + ".minisig":   d.sign(bin),
		name + ".sha256sum": []byte(hex.EncodeToString(sum[:]) + "  " + name + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) startRegistry() (string, error) {
	certPEM, keyPEM, err := selfSigned("127.0.0.1")
	if err != nil {
		return "", err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", err
	}
	d.registryCA = certPEM
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	d.stop = append(d.stop, func() { _ = srv.Close() })
	return ln.Addr().String(), nil
}

// push builds an image whose layer holds the release the way MinIO's
// images do (opt/bin/minio with .sha256sum and .minisig) and pushes it.
func (d *demo) push(host, release string, bin []byte) (string, error) {
	sum := sha256.Sum256(bin)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name    string
		content []byte
	}{
		{"opt/bin/minio", bin},
		{"opt/bin/minio.sha256sum", []byte(hex.EncodeToString(sum[:]) + "  minio\n")},
		{"opt/bin/minio.minisig", d.sign(bin)},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.content)), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.content); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressionLevel(1))
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Labels = map[string]string{"release": release, "version": release}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", err
	}
	image := host + "/minio/aistor:" + release
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(d.registryCA)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	if err := remote.Write(ref, img, remote.WithTransport(tr)); err != nil {
		return "", fmt.Errorf("push %s: %w", image, err)
	}
	return image, nil
}

// createTenant makes the Kubernetes side: the registry's CA for the
// operator and the tenant's certificate (which the example asks its user
// to create), then the example itself.
func (d *demo) createTenant(ctx context.Context, cs kubernetes.Interface, apply func(string) error) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.minioPort = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srvCert, srvKey, err := selfSigned("127.0.0.1")
	if err != nil {
		return err
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "aistor-ca-tls-demo-registry"}, Data: map[string][]byte{"ca.crt": d.registryCA}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: d.ex.namespace, Name: d.ex.name + "-tls"}, Data: map[string][]byte{"tls.crt": srvCert, "tls.key": srvKey, "ca.crt": srvCert}},
	} {
		if err := upsertSecret(ctx, cs, s); err != nil {
			return err
		}
	}
	manifest, err := d.ex.forMakeRun(d.oldImage, fmt.Sprintf("https://127.0.0.1:%d", d.minioPort))
	if err != nil {
		return err
	}
	return apply(manifest)
}

func upsertSecret(ctx context.Context, cs kubernetes.Interface, s *corev1.Secret) error {
	_, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cs.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// startMinIO waits for the tenant's generated Secret, lays it out as
// MinIO's certs directory and starts the older release on it.
func (d *demo) startMinIO(ctx context.Context, cs kubernetes.Interface, local string) error {
	var gen *corev1.Secret
	for {
		var err error
		gen, err = cs.CoreV1().Secrets(d.ex.namespace).Get(ctx, apiv1.GeneratedSecretName(d.ex.name), metav1.GetOptions{})
		if err == nil && len(gen.Data["CAs.operator.crt"]) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	dir := filepath.Join(local, "minio")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for rel, v := range cluster.MinIOCertsDir(gen.Data) {
		p := filepath.Join(dir, "certs", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, v, 0o600); err != nil {
			return err
		}
	}
	bin, err := cluster.InstallMinIO(d.older, filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(local, "minio.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "server", "--address", fmt.Sprintf("127.0.0.1:%d", d.minioPort),
		"--certs-dir", filepath.Join(dir, "certs"), filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+d.ex.user, "MINIO_ROOT_PASSWORD="+d.ex.password,
		"MINIO_UPDATE_MINISIGN_PUBKEY="+d.pub.String(), "MINIO_BROWSER=off", "MINIO_CI_CD=on")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start MinIO: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); logFile.Close() }()
	d.stop = append(d.stop, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return nil
}

func (d *demo) close() {
	for i := len(d.stop) - 1; i >= 0; i-- {
		d.stop[i]()
	}
}

// selfSigned makes a certificate for one IP that is its own CA.
func selfSigned(ip string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
