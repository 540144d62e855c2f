package binsource

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/upgradeserver"
)

func writeRelease(t *testing.T, dir, platform, release string) {
	t.Helper()
	d := filepath.Join(dir, platform)
	require.NoError(t, os.MkdirAll(d, 0o755))
	name := "minio." + release
	content := []byte(release)
	sum := sha256.Sum256(content)
	require.NoError(t, os.WriteFile(filepath.Join(d, name), content, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, name+".sha256sum"), upgradeserver.SHA256SumFile(hex.EncodeToString(sum[:]), name), 0o644))
}

func TestHousekeepingKeepsReferencedAndNewestReleases(t *testing.T) {
	dir := t.TempDir()
	releases := []string{"RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z", "RELEASE.2025-03-01T00-00-00Z",
		"RELEASE.2025-04-01T00-00-00Z", "RELEASE.2025-05-01T00-00-00Z"}
	for _, r := range releases {
		writeRelease(t, dir, "linux-amd64", r)
	}
	store, err := upgradeserver.NewStore(dir, zerolog.Nop(), upgradeserver.StoreOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	store.Scan()
	f, err := NewFetcher(FetcherConfig{Store: store})
	require.NoError(t, err)

	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range []string{"old-tenant", "unresolved"} {
		require.NoError(t, stores.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
			"metadata": map[string]any{"name": name, "namespace": "t"},
			"spec":     map[string]any{"image": "registry/minio:" + releases[0]},
		}}))
	}
	c := &Controller{cfg: ControllerConfig{Fetcher: f, Keep: 2}, log: zerolog.Nop(), stores: stores, wanted: map[string]string{}}

	c.setWanted("t/old-tenant", releases[0])
	c.housekeep()
	assert.Len(t, store.Binaries(), 5, "nothing is removed while an ObjectStore has not been resolved")

	c.setWanted("t/unresolved", releases[0])
	c.housekeep()
	var left []string
	for _, b := range store.Binaries() {
		left = append(left, b.Release)
	}
	assert.ElementsMatch(t, []string{releases[0], releases[3], releases[4]}, left,
		"the release a tenant wants and the two newest stay; the rest go")
	assert.NoFileExists(t, filepath.Join(dir, "linux-amd64", "minio."+releases[1]+".sha256sum"))
}

func TestKeychainFromPullSecrets(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("user:pa:ss"))
	k, err := newKeychain([]*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "t"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"https://registry.example:5000/v1/":{"auth":"` + auth + `"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "t"},
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"quay.io":{"username":"robot","password":"token"}}`)}},
	})
	require.NoError(t, err)
	for _, tt := range []struct {
		image      string
		user, pass string
	}{
		{"registry.example:5000/minio/aistor:x", "user", "pa:ss"},
		{"quay.io/minio/minio:x", "robot", "token"},
		{"docker.io/library/busybox", "", ""},
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
	assert.ErrorContains(t, err, "pull Secret t/c has neither")
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

func TestBinaryLargerThanTheBoundLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	land, err := newLanding(dir, "linux-amd64", "minio.RELEASE.X", 10)
	require.NoError(t, err)
	_, err = land.Write(make([]byte, 8))
	require.NoError(t, err)
	_, err = land.Write(make([]byte, 8))
	require.ErrorIs(t, err, errTooLarge)
	assert.Equal(t, "BinaryTooLarge", reason(err))
	land.abort()
	entries, err := os.ReadDir(filepath.Join(dir, "linux-amd64"))
	require.NoError(t, err)
	assert.Empty(t, entries, "no partial file stays in the store")
}
