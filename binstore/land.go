package binstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"aead.dev/minisign"

	"github.com/object-store-operator/operator/internal/reason"
)

// Staged is a binary written to a hidden temporary file in its platform
// directory, hashed on the way; Commit verifies it and makes it visible.
type Staged struct {
	s                       *Store
	platform, release, name string
	tmp                     *os.File
	prehash                 *minisign.Reader
	SHA256                  string
	Size                    int64
}

// hashCopy copies r to w, reading it once for its SHA-256 and prehash.
func hashCopy(w io.Writer, r io.Reader) (n int64, sha string, prehash *minisign.Reader, err error) {
	h := sha256.New()
	prehash = minisign.NewReader(io.TeeReader(r, h))
	n, err = io.Copy(w, prehash)
	return n, hex.EncodeToString(h.Sum(nil)), prehash, err
}

// Stage streams r (at most maxSize bytes) into a temporary file.
func (s *Store) Stage(platform, release string, r io.Reader, maxSize int64) (*Staged, error) {
	<-s.scanned
	name, err := BinaryName(release)
	if err != nil {
		return nil, err
	}
	if !ValidPlatform(platform) {
		return nil, fmt.Errorf("not a platform directory: %q", platform)
	}
	dir := filepath.Join(s.dir, platform)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	st := &Staged{s: s, platform: platform, release: release, name: name, tmp: tmp}
	st.Size, st.SHA256, st.prehash, err = hashCopy(tmp, io.LimitReader(r, maxSize+1))
	if err == nil && st.Size > maxSize {
		err = reason.Errorf(ReasonTooLarge, "binary larger than %d bytes", maxSize)
	}
	if err != nil {
		st.Discard()
		return nil, err
	}
	return st, nil
}

func (st *Staged) Discard() {
	if st.tmp == nil {
		return
	}
	st.tmp.Close()
	os.Remove(st.tmp.Name())
	st.tmp = nil
}

// Candidate is what a source says about a staged binary (empty: nothing).
type Candidate struct {
	WantSHA256 string
	Minisig    []byte
	Source     Source
	// Signable allows the Signer to sign bytes the source did not: only
	// for bytes whose provenance the caller verified (an image layer read
	// whole against its digest).
	Signable bool
}

// Commit verifies the staged binary and lands it in its digest directory,
// <platform>/sha256/<hex>/minio.<release>. A bad signature is never
// re-signed: it is a red flag, not a gap to fill. Bytes already stored
// under this release stay as they are (their first source on record);
// under another release name they are hard-linked: one copy on disk.
func (st *Staged) Commit(c Candidate) (*Binary, error) {
	defer st.Discard()
	s := st.s
	if c.WantSHA256 != "" && c.WantSHA256 != st.SHA256 {
		return nil, reason.Errorf(ReasonChecksumMismatch, "the source's checksum file says %s, the binary has %s", c.WantSHA256, st.SHA256)
	}
	sig, keyID, err := st.signature(&c)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.Current()
	// Stored already: kept, unless a public source (anyone can read the
	// bytes) lands over a private one, or an image's own signature over
	// one the platform key made for another image.
	from := fromManifest{manifest: c.Source.ManifestDigest, unsigned: len(c.Minisig) == 0}
	stored := snap.stored(st.platform, st.SHA256, st.name)
	if stored != nil && (!stored.private() || c.Source.Private) && !(stored.PlatformSigned() && len(c.Minisig) > 0) {
		return s.rememberFor(stored, from), nil
	}
	// Only the store's own files are linked: one placed by hand may be
	// rewritten in place, which would change every link.
	var same *Binary
	if i := slices.IndexFunc(snap.all, func(b *Binary) bool {
		return b.SHA256 == st.SHA256 && b.Platform == st.platform && b.inDigestDir() && b.component == ""
	}); i >= 0 {
		same = snap.all[i]
	}
	if stored != nil && stored.Source != nil { // the unit first charged stays charged
		c.Source.LandedFor = stored.Source.LandedFor
	}
	info, err := st.land(sig, c.Source, same)
	if err != nil {
		return nil, err
	}
	src := c.Source
	b := &Binary{Name: st.name, Release: st.release, Size: st.Size, ModTime: info.ModTime(), SHA256: st.SHA256, KeyID: keyID,
		Source: &src, rel: path.Join(st.digestDir(), st.name), info: info, sum: SHA256SumFile(st.SHA256, st.name), sig: sig}
	b.setPlatform(st.platform)
	if stored != nil && stored.Source != nil && stored.Source.ManifestDigest != "" { // still a source of the bytes
		b.also = stored.remember(fromManifest{manifest: stored.Source.ManifestDigest, unsigned: stored.PlatformSigned()})
	}
	s.change(func(all []*Binary) []*Binary {
		all = slices.DeleteFunc(all, func(o *Binary) bool { return o.rel == b.rel && o.component == "" })
		return append(all, b)
	})
	return b, nil
}

// rememberFor records that from holds stored's bytes (under mu).
func (s *Store) rememberFor(stored *Binary, from fromManifest) *Binary {
	if known, unsigned := stored.FromManifest(from.manifest); from.manifest == "" || (known && unsigned == from.unsigned) {
		return stored
	}
	next := *stored
	next.also = stored.remember(from)
	s.change(func(all []*Binary) []*Binary {
		for i, o := range all {
			if o == stored {
				all[i] = &next
			}
		}
		return all
	})
	return &next
}

// signature verifies the candidate's signature, or signs with the
// platform key when the source shipped none and allows it.
func (st *Staged) signature(c *Candidate) (sig []byte, keyID string, err error) {
	s := st.s
	if len(c.Minisig) > 0 {
		keyID, err = s.verify(st.prehash, c.Minisig)
		return c.Minisig, keyID, err
	}
	if s.opts.Signer == nil || !c.Signable {
		return nil, "", reason.Errorf(ReasonUnsigned, "%s from %s has no .minisig", st.name, c.Source)
	}
	sig = s.sign(st.prehash, st.name, st.SHA256, c.Source, "")
	keyID = FormatKeyID(s.opts.Signer.ID())
	c.Source.SignedBy = keyID
	return sig, keyID, nil
}

func (st *Staged) digestDir() string { return path.Join(st.platform, digestDirName, st.SHA256) }

// sign signs the bytes prehash read with the platform key. The trusted
// comment says what was signed and where it came from, so `minisign -V`
// shows the image, its digests and the ObjectStore it was signed for.
func (s *Store) sign(prehash *minisign.Reader, name, digest string, src Source, forObjectStore string) []byte {
	c := "timestamp:" + strconv.FormatInt(time.Now().Unix(), 10) + "\tfile:" + name + "\tsha256:" + digest
	if src.ObjectStore != "" {
		c += "\tobjectstore:" + src.ObjectStore
	}
	c += "\timage:" + src.Image + "\tmanifest:" + src.ManifestDigest + "\tlayer:" + src.LayerDigest
	note := "signature from the platform key of object-store-operator"
	if forObjectStore != "" {
		note += " for " + forObjectStore
	}
	return prehash.SignWithComments(*s.opts.Signer, c, note)
}

// land puts the binary into its digest directory: a hard link to same's
// file, else the staged file. Every temporary is in the platform
// directory, where the start's scan removes what an interruption leaves.
func (st *Staged) land(sig []byte, src Source, same *Binary) (os.FileInfo, error) {
	tmpDir := filepath.Join(st.s.dir, st.platform)
	dir := filepath.Join(st.s.dir, filepath.FromSlash(st.digestDir()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	final := filepath.Join(dir, st.name)
	// A stale checksum of a rejected attempt must not pair with new bytes.
	if err := os.Remove(final + SHA256SumSuffix); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("remove old checksum: %w", err)
	}
	linked := false
	if same != nil {
		linked = st.s.link(same, tmpDir, st.name, final)
	}
	if !linked {
		if err := st.tmp.Chmod(0o755); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", st.tmp.Name(), err)
		}
		if err := st.tmp.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", st.tmp.Name(), err)
		}
		if err := os.Rename(st.tmp.Name(), final); err != nil {
			return nil, fmt.Errorf("rename into %s: %w", final, err)
		}
		st.tmp.Close()
		st.tmp = nil
	}
	info, err := os.Stat(final)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", final, err)
	}
	if err := writeSidecars(tmpDir, dir, st.name, st.SHA256, sig, src); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, tmpDir} {
		if f, err := os.Open(d); err == nil {
			_ = f.Sync()
			f.Close()
		}
	}
	return info, nil
}

// link makes final a hard link to same's file, checked unchanged since it
// was indexed; false when it cannot (the caller lands a copy).
func (s *Store) link(same *Binary, tmpDir, name, final string) bool {
	if info, err := s.root.Stat(same.Path()); err != nil || !sameFile(same.info, info) {
		return false
	}
	tmp := filepath.Join(tmpDir, "."+name+"."+same.SHA256[:16]+".tmp")
	_ = os.Remove(tmp)
	if err := os.Link(filepath.Join(s.dir, filepath.FromSlash(same.Path())), tmp); err != nil {
		s.log.Warn().Err(err).Str("file", same.Path()).Msg("cannot hard-link a stored binary; storing another copy")
		return false
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return false
	}
	return true
}

// Publish makes b available to one ObjectStore only (src.ObjectStore) at
// sha256/<hex>/<component>/minio.<RELEASE>: a view in memory of b's file,
// found only with the component (64 hex characters derived from a secret).
// Its .minisig is b's own or, with sign, one the platform key makes for
// this ObjectStore alone: one tenant's is never served at another's URL.
func (s *Store) Publish(b *Binary, component string, src Source, sign bool) (*Binary, error) {
	if !ValidDigest(component) || b.component != "" || !b.inDigestDir() {
		return nil, fmt.Errorf("cannot publish %s for a tenant", b.Path())
	}
	if sign && s.opts.Signer == nil {
		return nil, fmt.Errorf("cannot sign %s for %s: no platform key is loaded", b.Path(), src.ObjectStore)
	}
	if f, ok := s.Current().TenantFile(b.SHA256, component, b.Name); ok && f.Binary.Platform == b.Platform {
		have := f.Binary
		switch {
		case !sign && bytes.Equal(have.sig, b.sig):
			return have, nil
		case sign && have.Source != nil && have.Source.ObjectStore == src.ObjectStore && have.KeyID == FormatKeyID(s.opts.Signer.ID()):
			return have, nil
		}
	}
	view := *b
	view.component, view.Source = component, &src
	if sign {
		var err error
		if view.sig, err = s.signFor(b, src); err != nil {
			return nil, err
		}
		view.KeyID = FormatKeyID(s.opts.Signer.ID())
		src.SignedBy = view.KeyID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// b may be gone since its snapshot: a view of it would answer 404.
	if !slices.ContainsFunc(s.Current().all, func(o *Binary) bool {
		return o.component == "" && o.SHA256 == b.SHA256 && o.Name == b.Name && o.Platform == b.Platform
	}) {
		return nil, fmt.Errorf("cannot publish %s for %s: it is no longer stored", b.Path(), src.ObjectStore)
	}
	s.change(func(all []*Binary) []*Binary {
		all = slices.DeleteFunc(all, func(o *Binary) bool {
			return o.component == component && o.SHA256 == b.SHA256 && o.Name == b.Name && o.Platform == b.Platform
		})
		return append(all, &view)
	})
	return &view, nil
}

func (s *Store) signFor(b *Binary, src Source) ([]byte, error) {
	f, err := s.Open(b)
	if err != nil {
		return nil, fmt.Errorf("sign %s for %s: %w", b.Path(), src.ObjectStore, err)
	}
	defer f.Close()
	_, _, prehash, err := hashCopy(io.Discard, io.NewSectionReader(f, 0, b.Size))
	if err != nil {
		return nil, fmt.Errorf("sign %s for %s: read: %w", b.Path(), src.ObjectStore, err)
	}
	return s.sign(prehash, b.Name, b.SHA256, src, src.ObjectStore), nil
}

// writeSidecars writes each sidecar atomically, the .sha256sum (which
// makes the binary whole) last.
func writeSidecars(tmpDir, dir, name, sha string, sig []byte, src Source) error {
	provenance, err := json.MarshalIndent(src, "", "  ")
	if err != nil {
		return fmt.Errorf("encode provenance: %w", err)
	}
	for i, data := range [][]byte{sig, provenance, SHA256SumFile(sha, name)} {
		file := name + []string{MinisigSuffix, sourceSuffix, SHA256SumSuffix}[i]
		tmp, err := os.CreateTemp(tmpDir, "."+file+".*.tmp")
		if err != nil {
			return fmt.Errorf("create temporary file for %s: %w", file, err)
		}
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, file))
		}
		if err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	return nil
}

// The reasons the store refuses a binary for (the file system's failures
// carry none); callers give each its severity and remedy.
const (
	ReasonChecksumMismatch = "ChecksumMismatch" // not the bytes the checksum names
	ReasonUnsigned         = "Unsigned"         // no .minisig, and nothing may sign it
	ReasonSignatureInvalid = "SignatureInvalid" // malformed, untrusted key, or does not verify
	ReasonTooLarge         = "BinaryTooLarge"
)

// Source is where a binary came from: the image as the ObjectStore named
// it, with the digests of its platform manifest and of the layer read
// (whole), or the release mirror's URL.
type Source struct {
	Image          string `json:"image,omitempty"`
	Registry       string `json:"registry,omitempty"`
	Repository     string `json:"repository,omitempty"`
	ManifestDigest string `json:"manifestDigest,omitempty"`
	LayerDigest    string `json:"layerDigest,omitempty"`
	MirrorURL      string `json:"mirrorUrl,omitempty"`
	SignedBy       string `json:"signedBy,omitempty"` // the platform key's, when the source did not sign
	// Private: pulled with the ObjectStore's credentials, so served only
	// at the URLs of the ObjectStores it was published for.
	Private     bool   `json:"private,omitempty"`
	ObjectStore string `json:"objectStore,omitempty"` // the namespace/name a view was published for
	// LandedFor is the unit whose pull landed the binary: its share is
	// charged for it until it is removed, across restarts.
	LandedFor string `json:"landedFor,omitempty"`
}

// String names the source for messages.
func (s Source) String() string {
	if s.MirrorURL != "" {
		return "mirror " + s.MirrorURL
	}
	return fmt.Sprintf("image %s (manifest %s, layer %s)", s.Image, s.ManifestDigest, s.LayerDigest)
}

// FormatKeyID prints a minisign key id as minisign does.
func FormatKeyID(id uint64) string { return strings.ToUpper(strconv.FormatUint(id, 16)) }

// ParsePublicKeys reads minisign public keys in their one-line base64 form
// (as MINIO_UPDATE_MINISIGN_PUBKEY takes them), comma-separated.
func ParsePublicKeys(list string) ([]minisign.PublicKey, error) {
	var keys []minisign.PublicKey
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var k minisign.PublicKey
		if err := k.UnmarshalText([]byte(item)); err != nil {
			return nil, fmt.Errorf("minisign public key %q: %w", item, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no minisign public key given")
	}
	return keys, nil
}

// verify checks sig against what r read with the trusted key it names,
// and returns that key's id.
func (s *Store) verify(r *minisign.Reader, sig []byte) (string, error) {
	var parsed minisign.Signature
	if err := parsed.UnmarshalText(sig); err != nil {
		return "", reason.Errorf(ReasonSignatureInvalid, "malformed .minisig: %w", err)
	}
	keyID := FormatKeyID(parsed.KeyID)
	if parsed.Algorithm != minisign.HashEdDSA { // a legacy one needs the whole binary in memory
		return "", reason.Errorf(ReasonSignatureInvalid,
			"legacy (not prehashed) minisign signature by key %s; sign with minisign -H or a current minisign", keyID)
	}
	for _, k := range s.trusted {
		if k.ID() != parsed.KeyID {
			continue
		}
		if r.Verify(k, sig) {
			return keyID, nil
		}
		return "", reason.Errorf(ReasonSignatureInvalid, "signature by key %s does not verify", keyID)
	}
	return "", reason.Errorf(ReasonSignatureInvalid, "signed by key %s, which is not trusted (trusted: %s)", keyID, strings.Join(s.TrustedKeyIDs(), ", "))
}
