package binstore

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"aead.dev/minisign"

	"github.com/object-store-operator/operator/internal/reason"
)

const (
	// maxSigFileSize bounds a .minisig file; a real one is about 300 bytes.
	maxSigFileSize = 4096
	// maxSourceFileSize bounds a provenance file.
	maxSourceFileSize = 8192
)

// Scan reads the directory and swaps its index in: every binary in a
// digest directory, and those an administrator placed at a plain path
// (<os>-<arch>/minio.<RELEASE>, or minio.<RELEASE> at the top, its
// platform read from its ELF header) before the start. It runs once, at
// start, before anything is written: what an interrupted landing left
// (hidden temporaries, lock files and tenants' directories of earlier
// versions) is removed first. Each binary is read once, for its SHA-256
// and its signature together.
func (s *Store) Scan() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.rejected)
	rootEntries := s.readDir(".")
	all := s.scanEntries("", "", rootEntries, nil)
	for _, p := range platformsIn(rootEntries) {
		s.removeLeftovers(p)
		all = s.scanEntries(p, p, s.readDir(p), all)
		digestRoot := path.Join(p, digestDirName)
		for _, e := range s.readDir(digestRoot) {
			if e.IsDir() && ValidDigest(e.Name()) {
				d := path.Join(digestRoot, e.Name())
				all = s.scanEntries(p, d, s.readDir(d), all)
			}
		}
	}
	prev := s.current.Load()
	next := index(all)
	s.current.Store(next)
	if prev == nil {
		prev = emptySnapshot
	}
	s.logChanges(prev, next)
	s.closeOnce.Do(func() { close(s.scanned) })
}

func platformsIn(entries []fs.DirEntry) []string {
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && ValidPlatform(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

func (s *Store) readDir(dir string) []fs.DirEntry {
	entries, err := fs.ReadDir(s.root.FS(), dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error().Err(err).Str("path", dir).Msg("cannot read store directory")
	}
	return entries
}

// scanEntries indexes the binaries among entries of dir, a platform
// directory (or the root) or one of its digest directories.
func (s *Store) scanEntries(platform, dir string, entries []fs.DirEntry, all []*Binary) []*Binary {
	for _, e := range entries {
		name := e.Name()
		if !isBinaryName(name) {
			continue
		}
		b, err := s.load(platform, dir, name)
		if err != nil {
			rel := path.Join(dir, name)
			s.rejected[rel] = err.Error()
			s.log.Error().Str("file", rel).Str("reason", reason.Of(err)).Err(err).
				Msg("binary rejected: not listed and not served")
			continue
		}
		all = append(all, b)
	}
	return all
}

// load reads and verifies one binary file of dir ("" for the root).
func (s *Store) load(platform, dir, name string) (*Binary, error) {
	if dir == "." {
		dir = ""
	}
	rel := path.Join(dir, name)
	want, sumData, sig, err := s.sidecars(rel, name)
	if err != nil {
		return nil, err
	}
	// root.Stat follows symlinks only while they stay inside the store.
	info, err := s.root.Stat(rel)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	b := &Binary{Name: name, Release: strings.TrimPrefix(name, "minio."), Size: info.Size(), ModTime: info.ModTime(),
		rel: rel, info: info, sum: sumData, sig: sig}
	sigErr, err := s.hash(b, platform == "")
	if err != nil {
		return nil, err
	}
	if b.SHA256 != want {
		return nil, reason.Errorf(ReasonChecksumMismatch, "file has sha256 %s, %s says %s", b.SHA256, name+SHA256SumSuffix, want)
	}
	// A digest directory holds exactly the bytes it is named after: a
	// digest path never serves other bytes, whatever was put there.
	if dir != platform && path.Base(dir) != b.SHA256 {
		return nil, reason.Errorf(ReasonChecksumMismatch, "file has sha256 %s but sits in the directory of %s", b.SHA256, dir)
	}
	if sigErr != nil {
		return nil, sigErr
	}
	if platform != "" {
		b.Platform = platform
		b.OS, b.Arch, _ = strings.Cut(platform, "-")
	}
	if src, err := s.readSmall(rel+sourceSuffix, maxSourceFileSize); err == nil {
		var source Source
		if err := json.Unmarshal(src, &source); err != nil {
			s.log.Warn().Str("file", rel+sourceSuffix).Err(err).Msg("unreadable provenance; the binary is served without it")
		} else {
			b.Source = &source
		}
	}
	return b, nil
}

// sidecars reads a binary's .sha256sum (returning the digest it gives)
// and its .minisig.
func (s *Store) sidecars(rel, name string) (want string, sum, sig []byte, err error) {
	sum, err = s.readSmall(rel+SHA256SumSuffix, maxSumFileSize)
	if err != nil {
		return "", nil, nil, fmt.Errorf("no usable %s: %w", name+SHA256SumSuffix, err)
	}
	want, sumName, err := ParseSHA256Sum(sum)
	if err != nil {
		return "", nil, nil, fmt.Errorf("malformed %s: %w", name+SHA256SumSuffix, err)
	}
	if sumName != name {
		return "", nil, nil, fmt.Errorf("%s names %q, not %q", name+SHA256SumSuffix, sumName, name)
	}
	sig, err = s.readSmall(rel+MinisigSuffix, maxSigFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil, reason.Errorf(ReasonUnsigned, "no %s beside the binary: MinIO's update client would refuse it", name+MinisigSuffix)
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("unreadable %s: %w", name+MinisigSuffix, err)
	}
	return want, sum, sig, nil
}

// hash reads b's file once for its SHA-256, the verdict on its signature
// (sigErr, reported after the checksum's) and, when wantPlatform
// (binaries at the root, with no <os>-<arch> directory to tell), the
// platform its ELF header names.
func (s *Store) hash(b *Binary, wantPlatform bool) (sigErr, err error) {
	f, err := s.root.Open(b.rel)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	prehash := minisign.NewReader(f)
	if _, err := io.Copy(sum, prehash); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if after, err := f.Stat(); err != nil || !sameFile(b.info, after) {
		return nil, errors.New("file changed while it was read")
	}
	b.SHA256 = hex.EncodeToString(sum.Sum(nil))
	b.KeyID, sigErr = s.verify(prehash, b.sig)
	if wantPlatform {
		b.OS, b.Arch = elfPlatform(f)
	}
	return sigErr, nil
}

func (s *Store) readSmall(rel string, limit int64) ([]byte, error) {
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}

// elfPlatform reads the platform of a Linux binary from its ELF header.
func elfPlatform(f io.ReaderAt) (osName, arch string) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", ""
	}
	defer ef.Close()
	switch ef.Machine {
	case elf.EM_X86_64:
		arch = "amd64"
	case elf.EM_AARCH64:
		arch = "arm64"
	case elf.EM_PPC64:
		arch = "ppc64le"
	case elf.EM_S390:
		arch = "s390x"
	default:
		return "", ""
	}
	return "linux", arch
}

// removeLeftovers removes from a platform directory what no running
// writer can own at start: hidden temporaries of an interrupted landing
// (".minio.*.tmp"), lock files of earlier versions (".*.lock"), and the
// tenants' directories earlier versions kept inside digest directories
// (a tenant's URL is now a view in memory, published again by its
// ObjectStore's next sync).
func (s *Store) removeLeftovers(platform string) {
	for _, e := range s.readDir(platform) {
		name := e.Name()
		if !e.IsDir() && strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".lock")) {
			if err := s.root.Remove(path.Join(platform, name)); err == nil {
				s.log.Info().Str("file", path.Join(platform, name)).Msg("removed a partial download left by an interrupted pull")
			}
		}
	}
	digestRoot := path.Join(platform, digestDirName)
	for _, d := range s.readDir(digestRoot) {
		for _, e := range s.readDir(path.Join(digestRoot, d.Name())) {
			if e.IsDir() && ValidDigest(e.Name()) {
				_ = os.RemoveAll(path.Join(s.dir, digestRoot, d.Name(), e.Name()))
			}
		}
	}
}

func (s *Store) logChanges(prev, next *Snapshot) {
	for _, w := range next.withheld {
		if !slices.ContainsFunc(prev.withheld, func(p Withheld) bool {
			return p.Platform == w.Platform && p.Release == w.Release && slices.Equal(p.SHA256s, w.SHA256s)
		}) {
			s.log.Warn().Str("platform", w.Platform).Str("release", w.Release).Strs("sha256", w.SHA256s).
				Str("reason", "ReleaseClaimedWithOtherBytes").Msg("release claimed with different binaries: served only at each digest URL, not at its plain path")
		}
	}
	key := func(b *Binary) string { return b.URLPath() + "\x00" + b.rel }
	old := map[string]*Binary{}
	for _, b := range prev.all {
		old[key(b)] = b
	}
	for _, b := range next.all {
		o, ok := old[key(b)]
		delete(old, key(b))
		if ok && o.SHA256 == b.SHA256 && bytes.Equal(o.sig, b.sig) {
			continue
		}
		ev := s.log.Info().Str("file", b.logName()).Str("release", b.Release).Str("platform", b.OS+"/"+b.Arch).
			Int64("size", b.Size).Str("sha256", b.SHA256).Str("keyId", b.KeyID)
		if b.Source != nil {
			ev = ev.Str("source", b.Source.String())
		}
		ev.Msg("binary indexed")
	}
	for _, b := range old {
		s.log.Info().Str("file", b.logName()).Msg("binary no longer served")
	}
}

// logName names b in the log: its file, or a tenant's view by its URL.
func (b *Binary) logName() string {
	if b.component != "" {
		return b.URLPath()
	}
	return b.rel
}
