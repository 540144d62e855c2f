package binstore

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"aead.dev/minisign"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/reason"
)

const release = "RELEASE.2025-04-08T15-41-24Z"

// rejectedUntyped marks a binary refused for a failure of no reason of
// the store's (a missing file, a symlink out of the store).
const rejectedUntyped = "untyped"

func newStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := New(dir, zerolog.Nop(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Scan()
	return s
}

func trusting(keys ...binstoretest.Key) Options {
	var o Options
	for _, k := range keys {
		o.TrustedKeys = append(o.TrustedKeys, k.Public)
	}
	return o
}

func TestOnlyBinariesMinIOWouldInstallAreIndexed(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	trusted, other := binstoretest.NewKey(t), binstoretest.NewKey(t)
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		listed bool
		reason string
	}{
		{"signed by a trusted key", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
		}, true, ""},
		{"no .sha256sum", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.Remove(filepath.Join(dir, "linux-amd64", "minio."+release+".sha256sum")))
		}, false, rejectedUntyped},
		{"bytes not matching the .sha256sum", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", "minio."+release), []byte("y"), 0o644))
		}, false, ReasonChecksumMismatch},
		{"no .minisig", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.Remove(filepath.Join(dir, "linux-amd64", "minio."+release+".minisig")))
		}, false, ReasonUnsigned},
		{"signed by another key", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), other)
		}, false, ReasonSignatureInvalid},
		{"a trusted key's signature of other bytes", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", "minio."+release+".minisig"), trusted.Sign(t, []byte("y")), 0o644))
		}, false, ReasonSignatureInvalid},
		{"garbage signature", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", "minio."+release+".minisig"), []byte("untrusted comment: x\nRWQ...\n"), 0o644))
		}, false, ReasonSignatureInvalid},
		{"legacy (not prehashed) signature", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", "minio."+release+".minisig"), minisign.Sign(trusted.Private, []byte("x")), 0o644))
		}, false, ReasonSignatureInvalid},
		{"symlink leading out of the store", func(t *testing.T, dir string) {
			outside := t.TempDir()
			binstoretest.WriteRelease(t, outside, "", release, []byte("outside"), trusted)
			for _, suffix := range []string{"", SHA256SumSuffix, MinisigSuffix} {
				require.NoError(t, os.Symlink(filepath.Join(outside, "minio."+release+suffix), filepath.Join(dir, "minio."+release+suffix)))
			}
		}, false, rejectedUntyped},
		{"hidden temporary file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".minio."+release+".tmp"), []byte("partial"), 0o644))
		}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			s := newStore(t, dir, trusting(trusted))
			if !tt.listed {
				assert.Empty(t, s.Current().Binaries())
				if tt.reason != "" {
					for rel, why := range s.rejected {
						assert.Contains(t, rel, "minio."+release)
						assert.NotEmpty(t, why)
					}
					assert.NotEmpty(t, s.rejected, "the rejection is recorded (and logged)")
				}
				return
			}
			bins := s.Current().Binaries()
			require.Len(t, bins, 1)
			assert.Equal(t, FormatKeyID(trusted.Public.ID()), bins[0].KeyID)
		})
	}
}

func TestRejectionReasonsAreTyped(t *testing.T) {
	trusted, other := binstoretest.NewKey(t), binstoretest.NewKey(t)
	dir := t.TempDir()
	binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), other)
	s := newStore(t, dir, trusting(trusted))
	_, err := s.load("linux-amd64", "linux-amd64", "minio."+release)
	require.Error(t, err)
	assert.Equal(t, ReasonSignatureInvalid, reason.Of(err))
	assert.Contains(t, err.Error(), FormatKeyID(other.Public.ID()), "the key id the signature names")
	assert.Contains(t, err.Error(), FormatKeyID(trusted.Public.ID()), "the trusted keys are named")
}

func TestModifiedBinaryIsRefusedThenDropped(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("good"), key)
	binstoretest.WriteRelease(t, dir, "linux-arm64", release, []byte("good too"), key)
	s := newStore(t, dir, trusting(key))
	require.Len(t, s.Current().Binaries(), 2)
	arm := s.Current().Binary("linux-arm64", release)
	require.NotNil(t, arm)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-arm64", "minio."+release), []byte("tampered"), 0o644))
	_, err := s.Open(arm)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a file modified after indexing is verified again, refused and dropped")
	bins := s.Current().Binaries()
	require.Len(t, bins, 1)
	assert.Equal(t, "linux-amd64", bins[0].Platform)
}

func TestRootBinaryPlatformComesFromItsELFHeader(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	self, err := os.Executable() // this test binary: a Linux ELF for GOARCH
	require.NoError(t, err)
	content, err := os.ReadFile(self)
	require.NoError(t, err)
	binstoretest.WriteRelease(t, dir, "", release, content, key)
	s := newStore(t, dir, trusting(key))
	bins := s.Current().Binaries()
	require.Len(t, bins, 1)
	assert.Equal(t, "linux", bins[0].OS)
	assert.Equal(t, runtime.GOARCH, bins[0].Arch)

}

func stage(t *testing.T, s *Store, content []byte) *Staged {
	t.Helper()
	st, err := s.Stage("linux-amd64", release, bytes.NewReader(content), 1<<20)
	require.NoError(t, err)
	return st
}

var imageA = Source{Image: "reg.a/minio:" + release, Registry: "reg.a", Repository: "minio", ManifestDigest: "sha256:aaa", LayerDigest: "sha256:a1"}
var imageB = Source{Image: "reg.b/minio:" + release, Registry: "reg.b", Repository: "minio", ManifestDigest: "sha256:bbb", LayerDigest: "sha256:b1"}

func TestCommitKeepsEachBinarysFirstSource(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, trusting(key))

	first := []byte("the official binary")
	b, err := stage(t, s, first).Commit(Candidate{WantSHA256: binstoretest.SHA256(first), Minisig: key.Sign(t, first), Source: imageA})
	require.NoError(t, err)
	assert.Equal(t, binstoretest.SHA256(first), b.SHA256)
	require.NotNil(t, b.Source)
	assert.Equal(t, imageA, *b.Source)
	assert.Equal(t, "linux-amd64/sha256/"+binstoretest.SHA256(first)+"/minio."+release, b.Path())

	// Another source with the same bytes: the stored binary, unchanged.
	b, err = stage(t, s, first).Commit(Candidate{Minisig: key.Sign(t, first), Source: imageB})
	require.NoError(t, err)
	assert.Equal(t, imageA, *b.Source, "the first source stays on record")

	// The record survives a restart: a new Store reads the provenance.
	again := newStore(t, dir, trusting(key))
	assert.Equal(t, imageA, *again.Current().Binary("linux-amd64", release).Source)
	tmp, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.tmp"))
	assert.Empty(t, tmp, "no temporary file is left behind")
}

func TestCommitRefusesWhatItCannotVerify(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	key, other := binstoretest.NewKey(t), binstoretest.NewKey(t)
	platform := binstoretest.NewKey(t)
	content := []byte("binary")
	tests := []struct {
		name   string
		opts   Options
		cand   Candidate
		reason string
	}{
		{"checksum mismatch", trusting(key), Candidate{WantSHA256: binstoretest.SHA256([]byte("other")), Minisig: key.Sign(t, content), Source: imageA}, ReasonChecksumMismatch},
		{"untrusted signature", trusting(key), Candidate{Minisig: other.Sign(t, content), Source: imageA}, ReasonSignatureInvalid},
		{"untrusted signature is not re-signed by the platform key", Options{TrustedKeys: []minisign.PublicKey{key.Public}, Signer: &platform.Private},
			Candidate{Minisig: other.Sign(t, content), Source: imageA, Signable: true}, ReasonSignatureInvalid},
		{"unsigned without a platform key", trusting(key), Candidate{Source: imageA, Signable: true}, ReasonUnsigned},
		{"unsigned mirror binary is not signed by the platform key", Options{Signer: &platform.Private},
			Candidate{Source: Source{MirrorURL: "https://mirror/x"}}, ReasonUnsigned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir, tt.opts)
			_, err := stage(t, s, content).Commit(tt.cand)
			require.Error(t, err)
			assert.Equal(t, tt.reason, reason.Of(err), "%v", err)
			assert.Empty(t, s.Current().Binaries())
			assert.Empty(t, visible(t, dir), "nothing visible landed")
		})
	}
}

func TestPlatformKeySignsVerifiedUnsignedImages(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	platform := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, Options{TrustedKeys: []minisign.PublicKey{binstoretest.NewKey(t).Public}, Signer: &platform.Private})
	content := []byte("hardened image binary")
	b, err := stage(t, s, content).Commit(Candidate{WantSHA256: binstoretest.SHA256(content), Source: imageA, Signable: true})
	require.NoError(t, err)
	assert.Equal(t, FormatKeyID(platform.Public.ID()), b.KeyID)
	assert.Equal(t, FormatKeyID(platform.Public.ID()), b.Source.SignedBy)
	assert.True(t, platform.Verify(content, b.Minisig()), "MinIO's verification with the platform public key succeeds")
	var sig minisign.Signature
	require.NoError(t, sig.UnmarshalText(b.Minisig()))
	for _, want := range []string{imageA.Image, imageA.ManifestDigest, imageA.LayerDigest, b.SHA256} {
		assert.Contains(t, sig.TrustedComment, want, "the signed comment records the source")
	}
}

func TestStageBoundsTheSize(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{})
	_, err := s.Stage("linux-amd64", release, strings.NewReader(strings.Repeat("x", 11)), 10)
	assert.Equal(t, ReasonTooLarge, reason.Of(err))
	tmp, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.tmp"))
	assert.Empty(t, tmp)
}

// TestTheStartRemovesWhatAnInterruptionLeft: the store has one writer,
// so what a killed landing left (temporaries, lock files of earlier
// versions, tenants' directories of earlier versions) is removed by the
// start's scan, before anything is written.
func TestTheStartRemovesWhatAnInterruptionLeft(t *testing.T) {
	// Its own store: it runs beside the others, its syncs to disk
	// overlapping theirs.
	t.Parallel()
	dir := t.TempDir()
	key := binstoretest.NewKey(t)
	content := []byte("stored")
	digest := binstoretest.SHA256(content)
	digestDir := filepath.Join("linux-amd64", "sha256", digest)
	binstoretest.WriteRelease(t, dir, digestDir, release, content, key)
	for _, leftover := range []string{
		filepath.Join("linux-amd64", ".minio."+release+".123.tmp"),
		filepath.Join("linux-amd64", ".minio.RELEASE.crashed.lock"),
		filepath.Join(digestDir, strings.Repeat("c", 64), "minio."+release),
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(leftover)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, leftover), nil, 0o644))
	}
	s := newStore(t, dir, trusting(key))
	hidden, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".*"))
	assert.Empty(t, hidden, "temporaries and lock files are gone")
	assert.NoDirExists(t, filepath.Join(dir, digestDir, strings.Repeat("c", 64)))
	assert.NotNil(t, s.Current().ByDigest(digest, release), "the stored binary stays")
}

// visible lists the store's files that are not hidden.
func visible(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
