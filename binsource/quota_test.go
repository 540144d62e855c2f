package binsource

import (
	"testing"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// Quotas: a pull that would land new bytes past the namespace's share or
// the store's limit is StoreFull, naming the usage and the limit; bytes
// already stored count once and cost nothing more; nothing is removed.
func TestQuotasCountSharedBytesOnceAndRemoveNothing(t *testing.T) {
	key := binstoretest.NewKey(t)
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{StoreMaxBytes: 300, NamespaceMaxBytes: 200})
	p := Platform{"linux", "amd64"}
	pull := func(ns, repo string, bin []byte) (*binstore.Binary, error) {
		t.Helper()
		img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
		ref, err := name.ParseReference("registry.example/" + repo + ":RELEASE.X")
		require.NoError(t, err)
		b, _, err := f.fromImage(withNamespace(t.Context(), ns), ref, ref.String(), img, p, "RELEASE.X", false)
		return b, err
	}
	bytesOf := func(c byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = c
		}
		return b
	}
	a1, a2, a3 := bytesOf('1', 100), bytesOf('2', 100), bytesOf('3', 100)

	b1, err := pull("team-a", "a/one", a1)
	require.NoError(t, err)
	f.reference("team-a/one", "team-a", []*binstore.Binary{b1})
	b2, err := pull("team-a", "a/two", a2)
	require.NoError(t, err)
	f.reference("team-a/two", "team-a", []*binstore.Binary{b2})

	// A third binary is past team-a's 200-byte share.
	_, err = pull("team-a", "a/three", a3)
	require.Error(t, err)
	assert.Equal(t, "StoreFull", reasonOf(err))
	assert.Contains(t, err.Error(), "team-a")
	assert.Contains(t, err.Error(), "200 bytes")
	// Nothing already served was removed for it, and it was not landed.
	assert.Len(t, f.cfg.Store.Current().All(), 2)
	assert.Equal(t, int64(200), f.cfg.Store.Current().StoredBytes())

	// The same bytes under another image of the namespace cost nothing.
	again, err := pull("team-a", "a/one-again", a1)
	require.NoError(t, err)
	assert.Equal(t, b1.SHA256, again.SHA256)

	// Another namespace: its share is untouched, and bytes team-a stored
	// are not stored again (the store's limit counts them once).
	shared, err := pull("team-b", "b/shared", a1)
	require.NoError(t, err)
	f.reference("team-b/shared", "team-b", []*binstore.Binary{shared})
	assert.Equal(t, int64(200), f.cfg.Store.Current().StoredBytes())
	b3, err := pull("team-b", "b/three", a3)
	require.NoError(t, err)
	f.reference("team-b/three", "team-b", []*binstore.Binary{b3})

	// The store's limit (300) is reached: new bytes of anyone are refused.
	_, err = pull("team-c", "c/four", bytesOf('4', 100))
	require.Error(t, err)
	assert.Equal(t, "StoreFull", reasonOf(err))
	assert.Contains(t, err.Error(), "300 bytes")
	assert.Equal(t, int64(300), f.cfg.Store.Current().StoredBytes())

	// Once an ObjectStore no longer references its bytes, its namespace's
	// share has room again (the bytes stay until housekeeping's grace).
	f.unreference("team-a/two")
	used, _ := f.namespaceUsage("team-a")
	assert.Equal(t, int64(100), used)
}
