package binstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"aead.dev/minisign"
)

// Staged is a binary written to a hidden temporary file in its platform
// directory, hashed on the way; Commit verifies it and makes it visible,
// Discard throws it away. Nothing staged is ever indexed.
type Staged struct {
	s        *Store
	platform string
	release  string
	name     string
	tmp      *os.File
	prehash  *minisign.Reader
	sha      hash.Hash
	// SHA256 and Size describe the staged bytes once Stage returned.
	SHA256 string
	Size   int64
}

// Stage streams r (at most maxSize bytes) into a temporary file for the
// release's binary under platform. Memory does not grow with the binary.
func (s *Store) Stage(platform, release string, r io.Reader, maxSize int64) (*Staged, error) {
	dir, name, err := s.prepare(platform, release)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	// Locked while it is written, so another replica's start-up cleaning
	// (RemoveStaleTemporaries) on a shared volume leaves it alone; the
	// lock goes with the file's closing.
	_ = syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	st := &Staged{s: s, platform: platform, release: release, name: name, tmp: tmp, sha: sha256.New()}
	st.prehash = minisign.NewReader(io.TeeReader(r, st.sha))
	n, err := io.Copy(tmp, io.LimitReader(st.prehash, maxSize+1))
	if err == nil && n > maxSize {
		err = &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("binary larger than %d bytes", maxSize)}
	}
	if err != nil {
		st.Discard()
		return nil, err
	}
	st.Size, st.SHA256 = n, hex.EncodeToString(st.sha.Sum(nil))
	return st, nil
}

// Discard removes the temporary file.
func (st *Staged) Discard() {
	if st.tmp == nil {
		return
	}
	st.tmp.Close()
	os.Remove(st.tmp.Name())
	st.tmp = nil
}

// Candidate is what a source says about a staged binary.
type Candidate struct {
	// WantSHA256 is the digest the source's checksum file gives; empty
	// when the source has none.
	WantSHA256 string
	// Minisig is the source's signature; nil when it has none.
	Minisig []byte
	// Source is where the bytes came from; recorded with the release.
	Source Source
	// Signable allows the store's Signer to sign the binary when the
	// source has no signature: only for bytes whose provenance the caller
	// verified (an image layer read whole against its digest).
	Signable bool
}

// Commit verifies the staged binary and lands it, unless the release is
// already served:
//   - bytes that do not match WantSHA256: ReasonChecksumMismatch;
//   - a signature no trusted key verifies: ReasonSignatureInvalid (never
//     re-signed: a bad signature is a red flag, not a gap to fill);
//   - no signature and no Signer (or not Signable): ReasonUnsigned;
//   - the release served with other bytes: ReasonConflict, naming both
//     sources; with the same bytes: the served binary, unchanged.
//
// The caller holds Lock for the release, so no other process lands it at
// the same time. Files land binary first and .sha256sum last, so the
// index never pairs a checksum with bytes it does not describe.
func (st *Staged) Commit(c Candidate) (*Binary, error) {
	defer st.Discard()
	s := st.s
	if c.WantSHA256 != "" && c.WantSHA256 != st.SHA256 {
		return nil, &Error{Reason: ReasonChecksumMismatch,
			Err: fmt.Errorf("the source's checksum file says %s, the binary has %s", c.WantSHA256, st.SHA256)}
	}
	sig := c.Minisig
	var keyID string
	if len(sig) > 0 {
		var err error
		if keyID, err = s.verify(st.prehash, sig); err != nil {
			return nil, err
		}
	} else {
		if s.opts.Signer == nil || !c.Signable {
			return nil, &Error{Reason: ReasonUnsigned, Err: fmt.Errorf("%s from %s has no .minisig", st.name, c.Source)}
		}
		sig = st.prehash.SignWithComments(*s.opts.Signer, trustedComment(st.name, st.SHA256, c.Source),
			"signature from the platform key of object-store-operator")
		keyID = FormatKeyID(s.opts.Signer.ID())
		c.Source.SignedBy = keyID
	}

	s.Scan()
	if served := s.Current().Binary(st.platform, st.release); served != nil {
		if served.SHA256 == st.SHA256 {
			return served, nil
		}
		existing := "a binary placed in the store directory"
		if served.Source != nil {
			existing = served.Source.String()
		}
		return nil, &Error{Reason: ReasonConflict, Err: fmt.Errorf(
			"minio.%s for %s is already served from %s with sha256 %s; %s has sha256 %s: not replaced",
			st.release, st.platform, existing, served.SHA256, c.Source, st.SHA256)}
	}
	info, err := st.land(sig, c.Source)
	if err != nil {
		return nil, &Error{Reason: ReasonOther, Err: err}
	}
	// The bytes were hashed and verified on their way in: the index need
	// not read them again.
	s.scanMu.Lock()
	s.hashes[filepath.Join(st.platform, st.name)] = hashed{info: info, digest: st.SHA256, sig: sig, keyID: keyID}
	s.scanMu.Unlock()
	s.Scan()
	b := s.Current().Binary(st.platform, st.release)
	if b == nil {
		return nil, &Error{Reason: ReasonOther, Err: fmt.Errorf("%s/%s was landed but is not listed; see the store's log", st.platform, st.name)}
	}
	return b, nil
}

// trustedComment is signed with the binary: it says what was signed and
// where it came from, so `minisign -V` shows the image and its digests.
func trustedComment(name, digest string, src Source) string {
	return "timestamp:" + strconv.FormatInt(time.Now().Unix(), 10) + "\tfile:" + name + "\tsha256:" + digest +
		"\timage:" + src.Image + "\tmanifest:" + src.ManifestDigest + "\tlayer:" + src.LayerDigest
}

func (st *Staged) land(sig []byte, src Source) (os.FileInfo, error) {
	dir := filepath.Join(st.s.dir, st.platform)
	final := filepath.Join(dir, st.name)
	if err := st.tmp.Chmod(0o755); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", st.tmp.Name(), err)
	}
	if err := st.tmp.Sync(); err != nil {
		return nil, fmt.Errorf("sync %s: %w", st.tmp.Name(), err)
	}
	// A stale checksum of an earlier, rejected attempt must not pair with
	// the new bytes.
	if err := os.Remove(final + SHA256SumSuffix); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("remove old checksum: %w", err)
	}
	if err := os.Rename(st.tmp.Name(), final); err != nil {
		return nil, fmt.Errorf("rename into %s: %w", final, err)
	}
	st.tmp.Close()
	st.tmp = nil
	info, err := os.Stat(final)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", final, err)
	}
	provenance, err := json.MarshalIndent(src, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode provenance: %w", err)
	}
	for _, f := range []struct {
		suffix string
		data   []byte
	}{
		{MinisigSuffix, sig},
		{sourceSuffix, provenance},
		{SHA256SumSuffix, SHA256SumFile(st.SHA256, st.name)},
	} {
		if err := writeAtomic(dir, st.name+f.suffix, f.data); err != nil {
			return nil, err
		}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return info, nil
}

func writeAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", name, err)
	}
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// IsConflict reports whether err is a release conflict.
func IsConflict(err error) bool { return ReasonOf(err) == ReasonConflict }
