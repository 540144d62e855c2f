package binsource

import (
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// Only a pull made with credentials from the ObjectStore's pull Secrets
// can be private; one the Secrets have nothing for is anonymous, so public.
func TestOnlyAPullWithCredentialsCanBePrivate(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("user:pass"))
	k, err := newKeychain([]*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example:5000":{"auth":"` + auth + `"}}}`)}}})
	require.NoError(t, err)
	none, err := newKeychain(nil)
	require.NoError(t, err)
	for image, want := range map[string]bool{"registry.example:5000/minio/aistor:x": true, "quay.io/minio/minio:x": false} {
		ref, err := name.ParseReference(image)
		require.NoError(t, err)
		assert.Equal(t, want, usesCredentials(k, ref.Context()), image)
		assert.False(t, usesCredentials(none, ref.Context()), image)
	}
}

// The URL component depends on the key, the digest and the ObjectStore's
// UID, and is the 64 lower-case hex characters the store accepts.
func TestURLComponentIsBoundToKeyDigestAndObjectStore(t *testing.T) {
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	d1, d2 := binstoretest.SHA256([]byte("1")), binstoretest.SHA256([]byte("2"))
	c := component(key, d1, "uid-a")
	assert.True(t, binstore.ValidDigest(c))
	assert.Equal(t, c, component(key, d1, "uid-a"), "every replica derives the same")
	for name, o := range map[string]string{
		"another ObjectStore": component(key, d1, "uid-b"),
		"other bytes":         component(key, d2, "uid-a"),
		"another key":         component(other, d1, "uid-a"),
	} {
		assert.NotEqual(t, c, o, name)
	}
}

// A private pull lands a binary served at no public path; a public pull of
// the same manifest does not reuse it (it pulls, and makes it public).
func TestPrivatePullIsNotServedPubliclyNorReusedByAPublicPull(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	bin := []byte("a licensed build")
	blob := gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0)
	img := singleLayerImage(t, blob)
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{})
	ref, err := name.ParseReference("registry.example/private/minio:RELEASE.X")
	require.NoError(t, err)
	p := Platform{"linux", "amd64"}

	b, pulled, err := f.fromImage(t.Context(), ref, ref.String(), img, p, "RELEASE.X", true)
	require.NoError(t, err)
	assert.True(t, pulled)
	assert.True(t, b.Private())
	snap := f.cfg.Store.Current()
	assert.Nil(t, snap.ByDigest(b.SHA256, "RELEASE.X"))
	assert.Nil(t, snap.Binary("linux-amd64", "RELEASE.X"))
	assert.Empty(t, snap.Binaries())

	b, pulled, err = f.fromImage(t.Context(), ref, ref.String(), img, p, "RELEASE.X", true)
	require.NoError(t, err)
	assert.False(t, pulled, "the private binary is reused for a private pull")
	assert.True(t, b.Private())

	b, pulled, err = f.fromImage(t.Context(), ref, ref.String(), img, p, "RELEASE.X", false)
	require.NoError(t, err)
	assert.True(t, pulled, "a public pull reads the bytes itself")
	assert.False(t, b.Private())
	assert.NotNil(t, f.cfg.Store.Current().ByDigest(b.SHA256, "RELEASE.X"))
}

// An image is private when it was read with credentials and an anonymous
// request for it is refused; one anyone can read is public, whatever
// credentials the tenant added.
func TestAnImageIsPrivateWhenTheRegistryRefusesAnonymousReads(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if (ok && (u != "user" || p != "pass")) || (!ok && strings.HasPrefix(r.URL.Path, "/v2/private/")) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": []byte("x")}, 0))
	f := testFetcher(t, binstore.Options{}, FetcherConfig{InsecureRegistries: []string{host}})
	auth := base64.StdEncoding.EncodeToString([]byte("user:pass"))
	creds, err := newKeychain([]*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`)}}})
	require.NoError(t, err)
	none, err := newKeychain(nil)
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)
	for repo, private := range map[string]bool{"private/minio:x": true, "public/minio:x": false} {
		ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "user", Password: "pass"})))
		assert.Equal(t, private, f.needsCredentials(t.Context(), ref, creds, digest), repo)
		assert.False(t, f.needsCredentials(t.Context(), ref, none, digest), "%s: a pull without credentials is public", repo)
	}
}

// An image that shipped no signature is known as such even when its bytes
// are later stored with another image's own signature: its ObjectStores
// keep being signed for by the platform key, never handed the other's.
func TestAnUnsignedImageStaysUnsignedWhenASignedImageHasItsBytes(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	platform, official := binstoretest.NewKey(t), binstoretest.NewKey(t)
	bin := []byte("the same binary")
	unsignedImg := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin}, 0))
	signedImg := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": official.Sign(t, bin)}, 0))
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{official.Public}, Signer: &platform.Private}, FetcherConfig{})
	p := Platform{"linux", "amd64"}
	hardened, err := name.ParseReference("registry.example/hardened/minio:RELEASE.X")
	require.NoError(t, err)
	vendor, err := name.ParseReference("registry.example/vendor/minio:RELEASE.X")
	require.NoError(t, err)
	manifest, err := unsignedImg.Digest()
	require.NoError(t, err)

	// What the fetcher records in Result.Unsigned for the image's binary.
	shippedNoSignature := func(manifest string, b *binstore.Binary) bool {
		_, unsigned := b.FromManifest(manifest)
		return unsigned
	}
	b, _, err := f.fromImage(t.Context(), hardened, hardened.String(), unsignedImg, p, "RELEASE.X", false)
	require.NoError(t, err)
	assert.True(t, b.PlatformSigned())
	assert.True(t, shippedNoSignature(manifest.String(), b))

	b, _, err = f.fromImage(t.Context(), vendor, vendor.String(), signedImg, p, "RELEASE.X", false)
	require.NoError(t, err)
	assert.False(t, b.PlatformSigned(), "the image's own signature is served at the digest path")
	signedManifest, err := signedImg.Digest()
	require.NoError(t, err)
	assert.False(t, shippedNoSignature(signedManifest.String(), b))

	b, pulled, err := f.fromImage(t.Context(), hardened, hardened.String(), unsignedImg, p, "RELEASE.X", false)
	require.NoError(t, err)
	assert.False(t, pulled)
	assert.True(t, shippedNoSignature(manifest.String(), b), "the hardened image's tenants are still signed for")
}
