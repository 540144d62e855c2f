package binstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

const release = "RELEASE.2025-04-08T15-41-24Z"

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
	trusted, other := binstoretest.NewKey(t), binstoretest.NewKey(t)
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		listed bool
		reason Reason
	}{
		{"signed by a trusted key", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
		}, true, ""},
		{"no .sha256sum", func(t *testing.T, dir string) {
			binstoretest.WriteRelease(t, dir, "linux-amd64", release, []byte("x"), trusted)
			require.NoError(t, os.Remove(filepath.Join(dir, "linux-amd64", "minio."+release+".sha256sum")))
		}, false, ReasonOther},
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
		}, false, ReasonOther},
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
	assert.Equal(t, ReasonSignatureInvalid, ReasonOf(err))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, FormatKeyID(other.Public.ID()), e.KeyID, "the key id the signature names")
	assert.Contains(t, err.Error(), FormatKeyID(trusted.Public.ID()), "the trusted keys are named")
}

func TestModifiedBinaryIsRefusedThenDropped(t *testing.T) {
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
	assert.ErrorIs(t, err, ErrChanged, "a file modified after indexing is refused before the rescan")
	s.Scan()
	bins := s.Current().Binaries()
	require.Len(t, bins, 1)
	assert.Equal(t, "linux-amd64", bins[0].Platform)
}

func TestRootBinaryPlatformComesFromItsELFHeader(t *testing.T) {
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

	s.Scan() // a rescan of the unchanged file keeps what was read once
	assert.Equal(t, runtime.GOARCH, s.Current().Binaries()[0].Arch)
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
	key, other := binstoretest.NewKey(t), binstoretest.NewKey(t)
	platform := binstoretest.NewKey(t)
	content := []byte("binary")
	tests := []struct {
		name   string
		opts   Options
		cand   Candidate
		reason Reason
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
			assert.Equal(t, tt.reason, ReasonOf(err), "%v", err)
			assert.Empty(t, s.Current().Binaries())
			assert.Empty(t, visible(t, dir), "nothing visible landed")
		})
	}
}

func TestPlatformKeySignsVerifiedUnsignedImages(t *testing.T) {
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
	assert.Equal(t, ReasonTooLarge, ReasonOf(err))
	tmp, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.tmp"))
	assert.Empty(t, tmp)
}

func TestLockExcludesAnotherHolderUntilReleased(t *testing.T) {
	dir := t.TempDir()
	// Two Stores on one directory stand for two replicas on a shared volume.
	a, b := newStore(t, dir, Options{}), newStore(t, dir, Options{})
	unlock, err := a.Lock(t.Context(), "linux-amd64", release)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx, "linux-amd64", release)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second holder waits")

	got := make(chan error, 1)
	go func() {
		unlockB, err := b.Lock(t.Context(), "linux-amd64", release)
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	unlock()
	require.NoError(t, <-got, "released, the other process gets it")
}

// TestLockFilesOfReleasesNoLongerStoredAreRemoved: a release's lock file
// lives while the lock is held. Tenants choose release names (an image's
// label), so lock files of releases that never landed, or were removed,
// would otherwise pile up in the store directory; a crashed holder's is
// removed at the next start.
func TestLockFilesOfReleasesNoLongerStoredAreRemoved(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, Options{})
	for i := range 50 {
		unlock, err := s.Lock(t.Context(), "linux-amd64", fmt.Sprintf("RELEASE.tenant-label-%d", i))
		require.NoError(t, err)
		unlock()
	}
	held, err := s.Lock(t.Context(), "linux-amd64", release)
	require.NoError(t, err)
	locks, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.lock"))
	assert.Equal(t, []string{".minio." + release + ".lock"}, baseNames(locks), "only the held lock has a file")
	held()
	locks, _ = filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.lock"))
	assert.Empty(t, locks)

	// A holder that crashed left its file; the next start removes it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", ".minio.RELEASE.crashed.lock"), nil, 0o644))
	s.RemoveStaleTemporaries()
	locks, _ = filepath.Glob(filepath.Join(dir, "linux-amd64", ".*.lock"))
	assert.Empty(t, locks)
}

// TestLockStaysExclusiveWhileLockFilesAreRemoved: two processes' holders
// (two Stores on one directory) take and release one release's lock many
// times at once; removing the file on release never lets two hold it.
func TestLockStaysExclusiveWhileLockFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{newStore(t, dir, Options{}), newStore(t, dir, Options{})}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				unlock, err := stores[i%2].Lock(t.Context(), "linux-amd64", release)
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "never two holders at once")
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// TestStartUpCleaningLeavesABinaryBeingStagedAlone: pulls stream into
// their temporary file without the release's lock (a slow registry must
// not hold another tenant's landing); another replica starting on the
// same volume must not remove that file.
func TestStartUpCleaningLeavesABinaryBeingStagedAlone(t *testing.T) {
	dir := t.TempDir()
	writer, starting := newStore(t, dir, Options{}), newStore(t, dir, Options{})
	pr, pw := io.Pipe()
	staged := make(chan error, 1)
	go func() {
		st, err := writer.Stage("linux-amd64", release, pr, 1<<20)
		if err == nil {
			st.Discard()
		}
		staged <- err
	}()
	_, err := pw.Write([]byte("the first bytes"))
	require.NoError(t, err)
	tmp, _ := filepath.Glob(filepath.Join(dir, "linux-amd64", ".minio.*.tmp"))
	require.Len(t, tmp, 1)
	starting.RemoveStaleTemporaries()
	assert.FileExists(t, tmp[0], "a file being staged stays")
	require.NoError(t, pw.Close())
	require.NoError(t, <-staged)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "linux-amd64", ".minio."+release+".123.tmp"), nil, 0o644))
	starting.RemoveStaleTemporaries()
	tmp, _ = filepath.Glob(filepath.Join(dir, "linux-amd64", ".minio.*.tmp"))
	assert.Empty(t, tmp, "an interrupted pull's file goes")
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
