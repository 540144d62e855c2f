package binsource

import (
	"bytes"
	"testing"

	"aead.dev/minisign"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// Quotas: a pull that would land new bytes past the namespace's share or
// the store's limit is StoreFull, naming the usage and the limit; bytes
// already stored count once and cost nothing more; nothing is removed.
func TestQuotasCountSharedBytesOnceAndRemoveNothing(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	f := testFetcher(t, binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}, FetcherConfig{StoreMaxBytes: 300, NamespaceMaxBytes: 200})
	p := Platform{"linux", "amd64"}
	pull := func(ns, repo string, bin []byte) (*binstore.Binary, error) {
		t.Helper()
		img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
		ref, err := name.ParseReference("registry.example/" + repo + ":RELEASE.X")
		require.NoError(t, err)
		b, _, err := f.fromImage(withUnit(t.Context(), ns), ref, ref.String(), img, p, "RELEASE.X", false)
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

	// An ObjectStore no longer referencing its bytes frees nothing while
	// they stay stored: team-a landed them. Once housekeeping removed them,
	// its share has room again.
	f.unreference("team-a/two")
	used, _ := f.unitUsage("team-a")
	assert.Equal(t, int64(200), used)
	require.NoError(t, f.cfg.Store.RemoveBinary(b2))
	used, _ = f.unitUsage("team-a")
	assert.Equal(t, int64(100), used)
	// team-b landed nothing of a1 (team-a had stored it): it is charged
	// only while it references it.
	used, _ = f.unitUsage("team-b")
	assert.Equal(t, int64(200), used)
	f.unreference("team-b/shared")
	used, _ = f.unitUsage("team-b")
	assert.Equal(t, int64(100), used)
}

// TestChurnDoesNotFillTheStorePastAShare (issue 29): clearing spec.image
// or re-creating an ObjectStore between pulls frees no share while what
// its pulls landed stays stored, a restart still knows who landed it,
// and the share frees once housekeeping removed it.
func TestChurnDoesNotFillTheStorePastAShare(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	opts := binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}}
	fetcherOn := func() *Fetcher {
		store, err := binstore.New(dir, zerolog.Nop(), opts)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		store.Scan()
		f, err := NewFetcher(FetcherConfig{Store: store, MaxSize: 1 << 20, NamespaceMaxBytes: 200})
		require.NoError(t, err)
		return f
	}
	f := fetcherOn()
	p := Platform{"linux", "amd64"}
	pull := func(f *Fetcher, repo string, c byte) (*binstore.Binary, error) {
		t.Helper()
		bin := bytes.Repeat([]byte{c}, 100)
		img := singleLayerImage(t, gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0))
		ref, err := name.ParseReference("registry.example/" + repo + ":RELEASE.X")
		require.NoError(t, err)
		b, _, err := f.fromImage(withUnit(t.Context(), "team-a"), ref, ref.String(), img, p, "RELEASE.X", false)
		return b, err
	}

	b1, err := pull(f, "a/one", '1')
	require.NoError(t, err)
	f.reference("team-a/s", "team-a", []*binstore.Binary{b1})
	f.unreference("team-a/s") // spec.image cleared
	b2, err := pull(f, "a/two", '2')
	require.NoError(t, err)
	f.reference("team-a/s", "team-a", []*binstore.Binary{b2})
	f.unreference("team-a/s") // deleted, and created again

	_, err = pull(f, "a/three", '3')
	require.Error(t, err, "what team-a landed fills its share, whatever it references")
	assert.Equal(t, "StoreFull", reasonOf(err))
	assert.Contains(t, err.Error(), "namespace team-a's ObjectStores use 200 bytes of its share of 200 bytes")
	assert.Equal(t, int64(200), f.cfg.Store.Current().StoredBytes(), "the store holds no more than the share")

	// A restart still knows who landed what.
	f.cfg.Store.Close()
	f = fetcherOn()
	_, err = pull(f, "a/three", '3')
	require.Error(t, err)
	assert.Equal(t, "StoreFull", reasonOf(err))

	// Once housekeeping removed what it landed, the share frees.
	stored := f.cfg.Store.Current().ByDigest(b1.SHA256, b1.Release)
	require.NotNil(t, stored)
	require.NoError(t, f.cfg.Store.RemoveBinary(stored))
	b3, err := pull(f, "a/three", '3')
	require.NoError(t, err)

	// Another unit referencing what team-a landed is charged for it;
	// it does not keep team-a's share full (hostile review: team-b
	// pointed at team-a's images and team-a stayed StoreFull as long).
	f.reference("team-b/s", "team-b", []*binstore.Binary{b2, b3})
	used, _ := f.unitUsage("team-a")
	assert.Zero(t, used, "what team-b references is team-b's")
	used, _ = f.unitUsage("team-b")
	assert.Equal(t, int64(200), used)
	f.unreference("team-b/s")
	used, _ = f.unitUsage("team-a")
	assert.Equal(t, int64(200), used, "once let go, the lander is charged again until it is removed")
}
