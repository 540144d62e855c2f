package binsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aead.dev/minisign"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/registryguard"
)

func TestHousekeepingKeepsReferencedAndNewestReleases(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	dir := t.TempDir()
	key := binstoretest.NewKey(t)
	releases := []string{"RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z", "RELEASE.2025-03-01T00-00-00Z",
		"RELEASE.2025-04-01T00-00-00Z", "RELEASE.2025-05-01T00-00-00Z"}
	for _, r := range releases {
		binstoretest.WriteRelease(t, dir, "linux-amd64", r, []byte(r), key)
	}
	store, err := binstore.New(dir, zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	store.Scan()
	f, err := NewFetcher(FetcherConfig{Store: store})
	require.NoError(t, err)

	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, rel := range map[string]string{"old-tenant": releases[0], "unresolved": releases[0], "new-tenant": releases[4]} {
		require.NoError(t, stores.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
			"metadata": map[string]any{"name": name, "namespace": "t"},
			"spec":     map[string]any{"image": "registry/minio:" + rel},
		}}))
	}
	c := testController(t, ControllerConfig{Fetcher: f, Keep: 2}, stores)
	image := "registry/minio:" + releases[0]

	c.record("t/old-tenant", outcome{image: image, release: releases[0]})
	c.record("t/new-tenant", outcome{image: "registry/minio:" + releases[4], release: releases[4]})
	c.gc.collect()
	assert.Len(t, store.Current().Binaries(), 5, "nothing is removed while an ObjectStore has not been resolved")

	c.record("t/unresolved", outcome{image: image, release: releases[0]})
	c.gc.collect()
	var left []string
	for _, b := range store.Current().Binaries() {
		left = append(left, b.Release)
	}
	assert.ElementsMatch(t, []string{releases[0], releases[3], releases[4]}, left,
		"the releases tenants want and the two newest (a rollback target of the newest wanted) stay; the rest go")
	assert.NoFileExists(t, filepath.Join(dir, "linux-amd64", "minio."+releases[1]+".sha256sum"))
}

func TestKeychainFromPullSecrets(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("user:pa:ss"))
	k, err := newKeychain([]*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"https://registry.example:5000/v1/":{"auth":"` + auth + `"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "t"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"quay.io":{"username":"robot","password":"token"}}`)}},
		// kubelet's rules: a wildcard host, and a path scope more specific
		// than a host-wide entry.
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "t"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{
				"*.corp.example":{"username":"wild","password":"card"},
				"registry.corp.example/team-a":{"username":"team-a","password":"a"}}}`)}},
	})
	require.NoError(t, err)
	for _, tt := range []struct {
		image      string
		user, pass string
	}{
		{"registry.example:5000/minio/aistor:x", "user", "pa:ss"},
		{"quay.io/minio/minio:x", "robot", "token"},
		{"docker.io/library/busybox", "", ""},
		{"mirror.corp.example/minio/aistor:x", "wild", "card"},
		{"registry.corp.example/team-a/minio:x", "team-a", "a"},
		{"registry.corp.example/team-b/minio:x", "wild", "card"},
	} {
		ref, err := name.ParseReference(tt.image)
		require.NoError(t, err)
		a, err := k.Resolve(ref.Context())
		require.NoError(t, err)
		cfg, err := a.Authorization()
		require.NoError(t, err)
		assert.Equal(t, tt.user, cfg.Username, tt.image)
		assert.Equal(t, tt.pass, cfg.Password, tt.image)
	}
	_, err = newKeychain([]*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "t"}, Data: map[string][]byte{"x": nil}}})
	assert.ErrorContains(t, err, "pull Secret t/c is neither of type kubernetes.io/dockerconfigjson")
	var _ authn.Keychain = k
}

func TestParsePlatforms(t *testing.T) {
	p, err := ParsePlatforms("linux/amd64, linux/arm64")
	require.NoError(t, err)
	assert.Equal(t, []Platform{{"linux", "amd64"}, {"linux", "arm64"}}, p)
	_, err = ParsePlatforms("linux")
	assert.Error(t, err)
	_, err = ParsePlatforms("linux/../x")
	assert.Error(t, err)
}

// blobLayer is a layer whose registry serves blob under digest.
type blobLayer struct {
	ggcrv1.Layer
	digest ggcrv1.Hash
	blob   []byte
}

func (l blobLayer) Digest() (ggcrv1.Hash, error) { return l.digest, nil }
func (l blobLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.blob)), nil
}
func (l blobLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

func gzipTar(t *testing.T, files map[string][]byte, padding int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for n, data := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	// Zero blocks after the end marker, as some image builders write.
	_, err := zw.Write(make([]byte, padding))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func hashOf(t *testing.T, b []byte) ggcrv1.Hash {
	t.Helper()
	h, _, err := ggcrv1.SHA256(bytes.NewReader(b))
	require.NoError(t, err)
	return h
}

func testFetcher(t *testing.T, opts binstore.Options, cfg FetcherConfig) *Fetcher {
	t.Helper()
	store, err := binstore.New(t.TempDir(), zerolog.Nop(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	store.Scan()
	cfg.Store = store
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 1 << 20
	}
	f, err := NewFetcher(cfg)
	require.NoError(t, err)
	return f
}

func TestLayerIsVerifiedOverTheWholeBlob(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	bin := []byte("the binary")
	files := map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}
	good := gzipTar(t, files, 0)
	// Same binary, different bytes after the tar end marker: a reader that
	// stops at the end marker cannot tell the two blobs apart.
	swapped := gzipTar(t, files, 4096)
	opts := binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}

	f := testFetcher(t, opts, FetcherConfig{})
	found, err := f.readLayer(blobLayer{digest: hashOf(t, good), blob: swapped}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1 << 30, 1 << 30})
	require.Error(t, err)
	assert.Nil(t, found)
	assert.Equal(t, "ChecksumMismatch", reasonOf(err))
	tmp, _ := filepath.Glob(filepath.Join(f.cfg.Store.Dir(), "linux-amd64", ".*.tmp"))
	assert.Empty(t, tmp, "the staged binary is discarded")

	found, err = f.readLayer(blobLayer{digest: hashOf(t, good), blob: good}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1 << 30, 1 << 30})
	require.NoError(t, err)
	require.NotNil(t, found)
	b, err := found.staged.Commit(binstore.Candidate{Minisig: found.sig, Source: binstore.Source{Image: "x", LayerDigest: found.layer}})
	require.NoError(t, err)
	assert.Equal(t, binstoretest.SHA256(bin), b.SHA256)
}

func TestPullReadsAreCapped(t *testing.T) {
	// It shares nothing and measures no memory: it runs beside the others.
	t.Parallel()
	// 2 MiB of zeros compress to a few KiB: a small blob, a layer twice
	// the cap (the cap is the budget's, whatever its size).
	bomb := gzipTar(t, map[string][]byte{"etc/zeros": make([]byte, 2<<20)}, 0)
	f := testFetcher(t, binstore.Options{}, FetcherConfig{})
	_, err := f.readLayer(blobLayer{digest: hashOf(t, bomb), blob: bomb}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1 << 30, 1 << 20})
	require.Error(t, err)
	assert.Equal(t, "ImageTooLarge", reasonOf(err))
	_, err = f.readLayer(blobLayer{digest: hashOf(t, bomb), blob: bomb}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1024, 1 << 30})
	assert.Equal(t, "ImageTooLarge", reasonOf(err))
}

func TestRegistriesAreReachedOverHTTPSOnly(t *testing.T) {
	var reached []string
	next := registryguard.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		reached = append(reached, r.URL.String())
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	rt := registryguard.HTTPSOnly(next, []string{"10.0.0.9:5000"})
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://10.0.0.8:5000/v2/", true},
		{"http://10.0.0.8:5000/v2/", false},
		{"http://localhost:5000/v2/", false},
		{"http://10.0.0.9:5000/v2/", true},
	} {
		req, err := http.NewRequest(http.MethodGet, tt.url, nil)
		require.NoError(t, err)
		_, err = rt.RoundTrip(req)
		if tt.ok {
			assert.NoError(t, err, tt.url)
			continue
		}
		require.Error(t, err, tt.url)
		assert.Equal(t, "RegistryNotTrusted", reasonOf(registryguard.Classify("get", err)), tt.url)
	}
	assert.Equal(t, []string{"https://10.0.0.8:5000/v2/", "http://10.0.0.9:5000/v2/"}, reached)
}

// singleLayerImage is an image whose one layer is blob.
func singleLayerImage(t *testing.T, blob []byte) ggcrv1.Image {
	t.Helper()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blob)), nil })
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	return img
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// fakeImage is an image of given layers under a given digest.
type fakeImage struct {
	ggcrv1.Image
	digest ggcrv1.Hash
	layers []ggcrv1.Layer
}

func (i fakeImage) Digest() (ggcrv1.Hash, error)            { return i.digest, nil }
func (i fakeImage) Layers() ([]ggcrv1.Layer, error)         { return i.layers, nil }
func (i fakeImage) ConfigFile() (*ggcrv1.ConfigFile, error) { return &ggcrv1.ConfigFile{}, nil }

// stallingLayer is a layer blob that sends nothing until release closes.
type stallingLayer struct {
	blobLayer
	started, release chan struct{}
}

func (l stallingLayer) Compressed() (io.ReadCloser, error) {
	close(l.started)
	<-l.release
	return io.NopCloser(bytes.NewReader(l.blob)), nil
}

// TestASlowImageClaimingAReleaseHoldsNoOtherTenantsPull: one tenant's image
// claims another's release (any label will do) and its registry sends
// its layer slowly, for up to the pull timeout. The other tenant's image of
// that release, from its own registry, lands meanwhile: the release's
// lock is held only to land, not while a registry streams.
func TestASlowImageClaimingAReleaseHoldsNoOtherTenantsPull(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	bin := []byte("the victim's binary")
	blob := gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0)
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{})
	const rel = "RELEASE.2026-01-10T10-00-00Z"
	p := Platform{"linux", "amd64"}

	slow := stallingLayer{blobLayer: blobLayer{digest: hashOf(t, []byte("never")), blob: []byte("never")}, started: make(chan struct{}), release: make(chan struct{})}
	defer close(slow.release)
	attacker := fakeImage{digest: hashOf(t, []byte("attacker manifest")), layers: []ggcrv1.Layer{slow}}
	attackerRef, err := name.ParseReference("slow.example/evil/minio:" + rel)
	require.NoError(t, err)
	go func() { _, _, _ = f.fromImage(t.Context(), attackerRef, attackerRef.String(), attacker, p, rel, false) }()
	<-slow.started // the slow pull is streaming

	victim := fakeImage{digest: hashOf(t, []byte("victim manifest")), layers: []ggcrv1.Layer{blobLayer{digest: hashOf(t, blob), blob: blob}}}
	victimRef, err := name.ParseReference("registry.example/minio/aistor:" + rel)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	b, _, err := f.fromImage(ctx, victimRef, victimRef.String(), victim, p, rel, false)
	require.NoError(t, err, "the other tenant's pull is not held by the slow one")
	assert.Equal(t, binstoretest.SHA256(bin), b.SHA256)
}
