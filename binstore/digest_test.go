package binstore

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// diskBytes is what du counts under dir: allocated blocks, each inode once.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var total int64
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	}))
	return total
}

func commitAs(t *testing.T, s *Store, rel string, content []byte, key binstoretest.Key, src Source) (*Binary, error) {
	t.Helper()
	st, err := s.Stage("linux-amd64", rel, bytesReader(content), 16<<20)
	require.NoError(t, err)
	return st.Commit(Candidate{WantSHA256: binstoretest.SHA256(content), Minisig: key.Sign(t, content), Source: src})
}

func TestOneBinaryUnderFiveReleaseNamesIsStoredOnce(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, trusting(key))
	// A MiB: a second copy would grow the store past the quarter's slack
	// four times over.
	content := randomContent(t, 1<<20)
	releases := []string{
		"RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z", "RELEASE.2025-03-01T00-00-00Z",
		"RELEASE.2025-04-01T00-00-00Z", "RELEASE.2025-05-01T00-00-00Z",
	}
	before := diskBytes(t, dir)
	for i, rel := range releases {
		src := imageA
		src.Image = "reg.a/tenant" + string(rune('a'+i)) + ":" + rel
		b, err := commitAs(t, s, rel, content, key, src)
		require.NoError(t, err, rel)
		assert.Equal(t, binstoretest.SHA256(content), b.SHA256)
		assert.Equal(t, "linux-amd64", b.Platform)
	}
	grown := diskBytes(t, dir) - before
	t.Logf("five release names of one %d-byte binary: the store grew by %d bytes", len(content), grown)
	assert.Less(t, grown, int64(len(content))+int64(len(content))/4, "one copy of the bytes, whatever names point at it")
	for _, rel := range releases {
		b := s.Current().ByDigest(binstoretest.SHA256(content), rel)
		require.NotNil(t, b, rel)
		f, err := s.Open(b)
		require.NoError(t, err)
		f.Close()
	}
	// Restarted, the store finds every name again.
	again := newStore(t, dir, trusting(key))
	for _, rel := range releases {
		assert.NotNil(t, again.Current().ByDigest(binstoretest.SHA256(content), rel), rel)
	}
}

func TestDigestPathsServeOnlyTheirBytes(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, trusting(key))
	mine, theirs := []byte("tenant B's genuine binary"), []byte("tenant A's relabelled binary")
	_, err := commitAs(t, s, release, theirs, key, imageA)
	require.NoError(t, err, "A claims the release first")
	b, err := commitAs(t, s, release, mine, key, imageB)
	require.NoError(t, err, "B is not blocked by A's claim")
	assert.Equal(t, binstoretest.SHA256(mine), b.SHA256)

	snap := s.Current()
	lookup := func(p string) []byte {
		f, ok := snap.Lookup(p)
		if !ok {
			return nil
		}
		return f.Binary.SHA256Sum()
	}
	for _, tc := range []struct {
		content []byte
	}{{mine}, {theirs}} {
		d := binstoretest.SHA256(tc.content)
		p := DigestPath(d, release)
		f, ok := snap.Lookup(p)
		require.True(t, ok, p)
		assert.Equal(t, KindBinary, f.Kind)
		assert.Equal(t, d, f.Binary.SHA256)
		assert.Equal(t, SHA256SumFile(d, "minio."+release), lookup(p+SHA256SumSuffix))
		sig, ok := snap.Lookup(p + MinisigSuffix)
		require.True(t, ok)
		assert.True(t, key.Verify(tc.content, sig.Binary.Minisig()))
	}
	for name, p := range map[string]string{
		"a digest under a release it was not stored under": DigestPath(binstoretest.SHA256(mine), "RELEASE.2024-01-01T00-00-00Z"),
		"a digest nothing has":                             DigestPath(binstoretest.SHA256([]byte("nothing")), release),
		"a digest in upper case":                           "sha256/" + upper(binstoretest.SHA256(mine)) + "/minio." + release,
		"traversal":                                        "sha256/../linux-amd64/minio." + release,
	} {
		_, ok := snap.Lookup(p)
		assert.False(t, ok, name)
	}

	// Disagreeing sources: the release is left out of the plain paths.
	_, ok := snap.Lookup("linux-amd64/minio." + release)
	assert.False(t, ok, "never served from whichever came first")
	assert.Nil(t, snap.Binary("linux-amd64", release))
	require.Len(t, snap.Withheld(), 1)
	w := snap.Withheld()[0]
	assert.Equal(t, release, w.Release)
	assert.ElementsMatch(t, []string{binstoretest.SHA256(mine), binstoretest.SHA256(theirs)}, w.SHA256s)
	assert.Empty(t, snap.Binaries(), "the plain listing leaves it out")
}

func TestPlainPathServesAReleaseEverySourceAgreesOn(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	content := []byte("one binary")
	binstoretest.WriteRelease(t, dir, "linux-amd64", release, content, key) // placed by hand
	s := newStore(t, dir, trusting(key))
	_, err := commitAs(t, s, release, content, key, imageA)
	require.NoError(t, err)
	_, err = commitAs(t, s, release, content, key, imageB)
	require.NoError(t, err)
	snap := s.Current()
	plain := snap.Binary("linux-amd64", release)
	require.NotNil(t, plain)
	assert.Equal(t, binstoretest.SHA256(content), plain.SHA256)
	assert.Len(t, snap.Binaries(), 1)
	assert.Empty(t, snap.Withheld())
	assert.NotNil(t, snap.ByDigest(binstoretest.SHA256(content), release))

	// A hand-placed binary with other bytes under the same name withdraws
	// the plain path too.
	binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("other bytes"), key)
	s.Scan()
	assert.Nil(t, s.Current().Binary("linux-amd64", release))
	assert.NotNil(t, s.Current().ByDigest(binstoretest.SHA256(content), release), "the digest path stays")
}

func TestADigestDirectoryWithOtherBytesIsNotServed(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	content, other := []byte("genuine"), []byte("impostor")
	// A correctly signed binary put into another digest's directory.
	binstoretest.WriteRelease(t, dir, filepath.Join("linux-amd64", "sha256", binstoretest.SHA256(content)), release, other, key)
	s := newStore(t, dir, trusting(key))
	assert.Nil(t, s.Current().ByDigest(binstoretest.SHA256(content), release))
	assert.Nil(t, s.Current().ByDigest(binstoretest.SHA256(other), release))
	assert.Empty(t, s.Current().All())
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func randomContent(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func upper(s string) string { return strings.ToUpper(s) }

// TestManifestsKnownToHoldABinaryAreBoundedAndGoWithIt: a commit that
// finds its bytes stored records its image's manifest on the stored
// binary, so the next resolution of that image reads no blob; tenants
// choose manifests, so at most maxAlso are kept (the oldest go first), and
// they go with the binary.
func TestManifestsKnownToHoldABinaryAreBoundedAndGoWithIt(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	s := newStore(t, t.TempDir(), trusting(key))
	content := []byte("served")
	commit := func(manifest string) *Binary {
		src := imageA
		src.ManifestDigest = manifest
		b, err := stage(t, s, content).Commit(Candidate{Minisig: key.Sign(t, content), Source: src})
		require.NoError(t, err)
		return b
	}
	commit("sha256:source")
	for i := range maxAlso + 10 {
		commit(fmt.Sprintf("sha256:%d", i))
	}
	b := s.Current().ByDigest(binstoretest.SHA256(content), release)
	require.NotNil(t, b)
	for manifest, want := range map[string]bool{"sha256:source": true, "sha256:9": false, "sha256:10": true, fmt.Sprintf("sha256:%d", maxAlso+9): true} {
		known, unsigned := b.FromManifest(manifest)
		assert.Equal(t, want, known, manifest)
		assert.False(t, unsigned, "each image shipped its signature")
	}
	assert.Len(t, b.also, maxAlso, "bounded")

	require.NoError(t, s.RemoveBinary(b))
	assert.Empty(t, s.Current().All(), "what was known goes with the binary")
}
