package binstore

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/object-store-operator/operator/internal/reason"
)

// Bounds of what is read of a binary's sidecars; a real .minisig is about
// 300 bytes.
const (
	maxSigFileSize    = 4096
	maxSourceFileSize = 8192
)

// Scan indexes the directory: every binary in a digest directory, and
// those an administrator placed at a plain path (<os>-<arch>/minio.<RELEASE>,
// or minio.<RELEASE> at the top, its platform read from its ELF header). It
// runs once, at start, after removing what an interrupted landing left.
func (s *Store) Scan() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.rejected)
	var all []*Binary
	scan := func(platform, dir string) {
		for _, e := range s.readDir(dir) {
			if !isBinaryName(e.Name()) {
				continue
			}
			if b, err := s.load(platform, dir, e.Name()); err != nil {
				s.reject(path.Join(dir, e.Name()), err)
			} else {
				all = append(all, b)
			}
		}
	}
	scan("", ".")
	for _, p := range s.readDir(".") {
		if !p.IsDir() || !ValidPlatform(p.Name()) {
			continue
		}
		s.removeLeftovers(p.Name())
		scan(p.Name(), p.Name())
		digestRoot := path.Join(p.Name(), digestDirName)
		for _, e := range s.readDir(digestRoot) {
			if e.IsDir() && ValidDigest(e.Name()) {
				scan(p.Name(), path.Join(digestRoot, e.Name()))
			}
		}
	}
	s.change(func([]*Binary) []*Binary { return all })
	s.closeOnce.Do(func() { close(s.scanned) })
}

func (s *Store) readDir(dir string) []fs.DirEntry {
	entries, err := fs.ReadDir(s.root.FS(), dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error().Err(err).Str("path", dir).Msg("cannot read store directory")
	}
	return entries
}

// load reads and verifies one binary file of dir against its sidecars.
func (s *Store) load(platform, dir, name string) (*Binary, error) {
	rel := path.Join(dir, name)
	sum, err := s.readSmall(rel+SHA256SumSuffix, maxSumFileSize)
	if err != nil {
		return nil, fmt.Errorf("no usable %s: %w", name+SHA256SumSuffix, err)
	}
	want, sumName, err := ParseSHA256Sum(sum)
	if err != nil {
		return nil, fmt.Errorf("malformed %s: %w", name+SHA256SumSuffix, err)
	}
	if sumName != name {
		return nil, fmt.Errorf("%s names %q, not %q", name+SHA256SumSuffix, sumName, name)
	}
	sig, err := s.readSmall(rel+MinisigSuffix, maxSigFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, reason.Errorf(ReasonUnsigned, "no %s beside the binary: MinIO's update client would refuse it", name+MinisigSuffix)
	}
	if err != nil {
		return nil, fmt.Errorf("unreadable %s: %w", name+MinisigSuffix, err)
	}
	// root.Stat follows symlinks only while they stay inside the store.
	info, err := s.root.Stat(rel)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	_, sha, prehash, err := hashCopy(io.Discard, f)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if after, err := f.Stat(); err != nil || !sameFile(info, after) {
		return nil, errors.New("file changed while it was read")
	}
	b := &Binary{Name: name, Release: strings.TrimPrefix(name, "minio."), Size: info.Size(), ModTime: info.ModTime(),
		SHA256: sha, rel: rel, info: info, sum: sum, sig: sig}
	if b.SHA256 != want {
		return nil, reason.Errorf(ReasonChecksumMismatch, "file has sha256 %s, %s says %s", b.SHA256, name+SHA256SumSuffix, want)
	}
	// A digest path never serves other bytes, whatever was put there.
	if dir != platform && dir != "." && path.Base(dir) != b.SHA256 {
		return nil, reason.Errorf(ReasonChecksumMismatch, "file has sha256 %s but sits in the directory of %s", b.SHA256, dir)
	}
	if b.KeyID, err = s.verify(prehash, sig); err != nil {
		return nil, err
	}
	b.setPlatform(platform)
	if platform == "" {
		b.OS, b.Arch = elfPlatform(f)
	}
	if data, err := s.readSmall(rel+sourceSuffix, maxSourceFileSize); err == nil {
		var src Source
		if err := json.Unmarshal(data, &src); err != nil {
			s.log.Warn().Str("file", rel+sourceSuffix).Err(err).Msg("unreadable provenance; the binary is served without it")
		} else {
			b.Source = &src
		}
	}
	return b, nil
}

func (s *Store) readSmall(rel string, limit int64) ([]byte, error) {
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	return data, err
}

// elfPlatform reads the platform of a Linux binary from its ELF header.
func elfPlatform(f io.ReaderAt) (osName, arch string) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", ""
	}
	defer ef.Close()
	arch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x"}[ef.Machine]
	if arch == "" {
		return "", ""
	}
	return "linux", arch
}

// removeLeftovers removes from a platform directory what no writer owns
// at start: hidden temporaries of an interrupted landing, lock files of
// earlier versions, and the tenants' directories earlier versions kept
// inside digest directories (a tenant's URL is now a view in memory).
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

// logChanges logs what prev and next serve differently.
func (s *Store) logChanges(prev, next *Snapshot) {
	for _, w := range next.withheld {
		if !slices.ContainsFunc(prev.withheld, func(p Withheld) bool {
			return p.Platform == w.Platform && p.Release == w.Release && slices.Equal(p.SHA256s, w.SHA256s)
		}) {
			s.log.Warn().Str("platform", w.Platform).Str("release", w.Release).Strs("sha256", w.SHA256s).
				Str("reason", "ReleaseClaimedWithOtherBytes").Msg("release claimed with different binaries: served only at each digest URL, not at its plain path")
		}
	}
	// A view is named by its URL, a file by its path.
	name := func(b *Binary) string {
		if b.component != "" {
			return b.URLPath()
		}
		return b.rel
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
		ev := s.log.Info().Str("file", name(b)).Str("release", b.Release).Str("platform", b.OS+"/"+b.Arch).
			Int64("size", b.Size).Str("sha256", b.SHA256).Str("keyId", b.KeyID)
		if b.Source != nil {
			ev = ev.Str("source", b.Source.String())
		}
		ev.Msg("binary indexed")
	}
	for _, b := range old {
		s.log.Info().Str("file", name(b)).Msg("binary no longer served")
	}
}
