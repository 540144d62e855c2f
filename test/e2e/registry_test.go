package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/testutil"
)

// testRegistry is go-containerregistry's registry served over TLS behind
// basic auth, with a certificate only its own CA vouches for. Repositories
// under private/ are read only with credentials; others anonymously too.
// privateRepos is the prefix of the test registry's repositories that
// refuse anonymous reads.
const privateRepos = "private/"

type testRegistry struct {
	host       string
	caPEM      []byte
	user, pass string
	pushOpts   []remote.Option
	// blobGets counts blob downloads by digest, to see fetches shared.
	blobGets sync.Map
	// throttle, when set, slows blob downloads to about this many bytes/s.
	throttle atomic.Int64
	// swap maps a blob digest to other bytes the registry serves under it,
	// as a compromised or broken registry would.
	swap sync.Map
}

func startRegistry(t testing.TB) *testRegistry {
	t.Helper()
	r := &testRegistry{user: "puller", pass: "s3cret"}
	now := time.Now()
	certPEM, keyPEM, _ := testutil.KeyPair(t, nil, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	r.caPEM = certPEM
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Wrong credentials are always refused, and so is anything
		// anonymous but reading a repository outside private/ (public
		// images, as on a real registry; pushes need credentials).
		u, p, ok := req.BasicAuth()
		anonymousRead := !ok && (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
			strings.HasPrefix(req.URL.Path, "/v2/") && req.URL.Path != "/v2/" && !strings.HasPrefix(req.URL.Path, "/v2/"+privateRepos)
		if !anonymousRead && (!ok || u != r.user || p != r.pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
			digest := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
			n, _ := r.blobGets.LoadOrStore(digest, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			if rate := r.throttle.Load(); rate > 0 {
				w = &slowWriter{ResponseWriter: w, rate: rate}
			}
			if other, ok := r.swap.Load(digest); ok {
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(other.([]byte))
				return
			}
		}
		inner.ServeHTTP(w, req)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "https://")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	r.pushOpts = []remote.Option{remote.WithTransport(transport), remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})}
	return r
}

type slowWriter struct {
	http.ResponseWriter
	rate int64
}

func (s *slowWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := min(len(p), 64<<10)
		n, err := s.ResponseWriter.Write(p[:chunk])
		written += n
		if err != nil {
			return written, err
		}
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		time.Sleep(time.Duration(int64(n) * int64(time.Second) / s.rate))
		p = p[chunk:]
	}
	return written, nil
}

// imageSpec describes what a test image holds for one platform.
type imageSpec struct {
	binary      []byte
	noBinary    bool              // the layer has no minio binary at all
	noSidecars  bool              // hardened image: no .sha256sum/.minisig
	corruptSum  bool              // the .sha256sum does not match the binary
	signer      *binstoretest.Key // signs the .minisig; nil: testKey
	binaryPath  string
	releaseLbl  string
	extraLayers int
}

func tarLayer(t testing.TB, files map[string][]byte) ggcrv1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := tw.Write(files[n])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	data := buf.Bytes()
	// The fastest gzip level: a real MinIO binary is over 100 MiB, and the
	// layer is compressed once for its digest and once for the push.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	require.NoError(t, err)
	return layer
}

func buildImage(t testing.TB, spec imageSpec, os, arch string) ggcrv1.Image {
	t.Helper()
	var layers []ggcrv1.Layer
	for i := 0; i < spec.extraLayers; i++ {
		layers = append(layers, tarLayer(t, map[string][]byte{fmt.Sprintf("etc/file%d", i): randomBytes(t, 1024)}))
	}
	files := map[string][]byte{"etc/os-release": []byte("ID=test\n")}
	if !spec.noBinary {
		p := spec.binaryPath
		if p == "" {
			p = "opt/bin/minio"
		}
		files[p] = spec.binary
		if !spec.noSidecars {
			sum := sha256.Sum256(spec.binary)
			if spec.corruptSum {
				sum = sha256.Sum256([]byte("something else"))
			}
			dir := p[:strings.LastIndex(p, "/")]
			files[dir+"/minio.sha256sum"] = []byte(hex.EncodeToString(sum[:]) + "  minio\n")
			key := testKey
			if spec.signer != nil {
				key = *spec.signer
			}
			files[dir+"/minio.minisig"] = key.Sign(t, spec.binary)
		}
	}
	layers = append(layers, tarLayer(t, files))
	img, err := mutate.AppendLayers(empty.Image, layers...)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = os, arch
	if spec.releaseLbl != "" {
		cfg.Config.Labels = map[string]string{"release": spec.releaseLbl, "version": spec.releaseLbl}
	}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	return img
}

// pushIndex pushes a multi-arch index with one image per platform.
func (r *testRegistry) pushIndex(t testing.TB, repoTag string, specs map[string]imageSpec) string {
	t.Helper()
	idx := ggcrv1.ImageIndex(empty.Index)
	for platform, spec := range specs {
		os, arch, _ := strings.Cut(platform, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        buildImage(t, spec, os, arch),
			Descriptor: ggcrv1.Descriptor{Platform: &ggcrv1.Platform{OS: os, Architecture: arch}},
		})
	}
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(ref, idx, r.pushOpts...))
	return ref.String()
}

// layerDigests lists the layer digests of every image behind ref.
func (r *testRegistry) layerDigests(t testing.TB, ref string) []string {
	t.Helper()
	parsed, err := name.ParseReference(ref)
	require.NoError(t, err)
	idx, err := remote.Index(parsed, r.pushOpts...)
	require.NoError(t, err)
	manifest, err := idx.IndexManifest()
	require.NoError(t, err)
	var out []string
	for _, m := range manifest.Manifests {
		img, err := idx.Image(m.Digest)
		require.NoError(t, err)
		layers, err := img.Layers()
		require.NoError(t, err)
		for _, l := range layers {
			d, err := l.Digest()
			require.NoError(t, err)
			out = append(out, d.String())
		}
	}
	return out
}

// pushImage pushes a single-platform image.
func (r *testRegistry) pushImage(t testing.TB, repoTag string, spec imageSpec) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repoTag)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, buildImage(t, spec, "linux", "amd64"), r.pushOpts...))
	return ref.String()
}

func dockerConfigSecret(t testing.TB, ns, secretName, host, user, pass string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	require.NoError(t, err)
	_, err = adminClient(t).CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// trustCA runs docs/trust.md's command.
func trustCA(t testing.TB, ns, name string, caPEM []byte) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(file, caPEM, 0o600))
	kubectl(t, "create", "secret", "generic", name, "-n", ns, "--from-file=ca.crt="+file)
}

func tlsKeyPair(certPEM, keyPEM []byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}
