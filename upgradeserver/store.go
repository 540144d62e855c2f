package upgradeserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

const (
	sumSuffix = ".sha256sum"
	sigSuffix = ".minisig"
	// maxSigFileSize bounds a .minisig file; a real one is about 300 bytes.
	maxSigFileSize = 4096
)

// Binary is a MinIO binary the store serves: its bytes matched its
// .sha256sum when it was indexed.
type Binary struct {
	// Name is the file name, minio.<RELEASE>.
	Name string
	// Release is the name without the "minio." prefix.
	Release string
	// Platform is the <os>-<arch> subdirectory, or "" at the store's root.
	Platform string
	// OS and Arch come from the subdirectory or, at the root, from the
	// binary's ELF header; empty when neither tells.
	OS, Arch string
	Size     int64
	ModTime  time.Time
	// SHA256 is the lower-case hex digest, verified against the .sha256sum.
	SHA256 string
	// Signed reports whether a .minisig sits beside the binary.
	Signed bool

	info    os.FileInfo
	sum     []byte
	sig     []byte
	sumETag string
	sigETag string
}

// Path is the binary's path below the store root, e.g. linux-amd64/minio.RELEASE.X.
func (b *Binary) Path() string { return path.Join(b.Platform, b.Name) }

// fileKind says which of a binary's three files a request names.
type fileKind int

const (
	kindBinary fileKind = iota
	kindSum
	kindSig
)

type fileRef struct {
	binary *Binary
	kind   fileKind
}

// index is an immutable snapshot of the store; a rescan builds a new one
// and swaps it in whole.
type index struct {
	binaries []*Binary
	files    map[string]fileRef
	listings listingCache
}

// StoreOptions tune a Store; the zero value is usable.
type StoreOptions struct {
	// ScanInterval re-reads the directory even without file events, in
	// case an event was missed (network file systems). Default 30s.
	ScanInterval time.Duration
	// Debounce waits for a burst of file events to settle. Default 200ms.
	Debounce time.Duration
}

// Store indexes a directory of MinIO binaries and serves them. The index is
// rebuilt when files appear, change or go; a binary whose bytes do not match
// its .sha256sum is never indexed.
type Store struct {
	dir  string
	root *os.Root
	log  zerolog.Logger
	opts StoreOptions

	current atomic.Pointer[index]
	kick    chan struct{}
	onIndex func(int)

	scanMu   sync.Mutex
	hashes   map[string]hashed // guarded by scanMu
	rejected map[string]string // guarded by scanMu: last reason logged per file
}

// hashed is what indexing learned from reading a file, kept while the file
// stays the same.
type hashed struct {
	info     os.FileInfo
	digest   string
	os, arch string // from the ELF header
}

// sameFile reports whether b is a as it was: same inode, size and mtime.
func sameFile(a, b os.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// NewStore opens (and creates if needed) the store directory. Call Run to
// index it and keep the index current.
func NewStore(dir string, log zerolog.Logger, opts StoreOptions) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create update directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open update directory %s: %w", dir, err)
	}
	if opts.ScanInterval <= 0 {
		opts.ScanInterval = 30 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 200 * time.Millisecond
	}
	return &Store{
		dir:      dir,
		root:     root,
		log:      log.With().Str("component", "store").Str("dir", dir).Logger(),
		opts:     opts,
		kick:     make(chan struct{}, 1),
		hashes:   map[string]hashed{},
		rejected: map[string]string{},
	}, nil
}

// Dir is the directory the store serves.
func (s *Store) Dir() string { return s.dir }

// Ready reports whether the store has been indexed at least once.
func (s *Store) Ready() error {
	if s.current.Load() == nil {
		return errors.New("update store not indexed yet")
	}
	return nil
}

// Binaries returns the indexed binaries, sorted by platform and name.
func (s *Store) Binaries() []Binary {
	idx := s.current.Load()
	if idx == nil {
		return nil
	}
	out := make([]Binary, len(idx.binaries))
	for i, b := range idx.binaries {
		out[i] = *b
	}
	return out
}

// Rescan asks Run to re-index soon, without waiting.
func (s *Store) Rescan() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run indexes the store, then re-indexes on file events, on Rescan and every
// ScanInterval until ctx ends.
func (s *Store) Run(ctx context.Context) error {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		// Without inotify the periodic scan still finds every change.
		s.log.Warn().Err(err).Msg("file events unavailable; relying on periodic rescans")
	} else {
		defer watcher.Close()
	}
	watched := map[string]bool{}
	// watch adds the store and the platform directories a scan found.
	watch := func(platforms []string) {
		if watcher == nil {
			return
		}
		dirs := []string{s.dir}
		for _, p := range platforms {
			dirs = append(dirs, path.Join(s.dir, p))
		}
		for _, d := range dirs {
			if watched[d] {
				continue
			}
			if err := watcher.Add(d); err != nil {
				s.log.Warn().Err(err).Str("path", d).Msg("cannot watch directory; relying on periodic rescans")
				continue
			}
			watched[d] = true
		}
	}

	watch(s.Scan())
	ticker := time.NewTicker(s.opts.ScanInterval)
	defer ticker.Stop()
	var debounce <-chan time.Time
	var events <-chan fsnotify.Event
	var errs <-chan error
	if watcher != nil {
		events, errs = watcher.Events, watcher.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Op&fsnotify.Remove != 0 || ev.Op&fsnotify.Rename != 0 {
				delete(watched, ev.Name)
			}
			if debounce == nil {
				debounce = time.After(s.opts.Debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			s.log.Warn().Err(err).Msg("file event error; rescanning")
			s.Rescan()
		case <-debounce:
			debounce = nil
			watch(s.Scan())
		case <-s.kick:
			watch(s.Scan())
		case <-ticker.C:
			watch(s.Scan())
		}
	}
}

func (s *Store) platformDirs() []string {
	entries, err := fs.ReadDir(s.root.FS(), ".")
	if err != nil {
		return nil
	}
	return platformsIn(entries)
}

func platformsIn(entries []fs.DirEntry) []string {
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && validPlatform(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// Scan re-indexes the store now, swaps the new index in and returns the
// <os>-<arch> directories it found. Binaries are hashed only when their
// size, modification time or inode changed.
func (s *Store) Scan() []string {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()

	next := &index{files: map[string]fileRef{}}
	seen := map[string]bool{}
	rootEntries := s.readDir(".")
	platforms := platformsIn(rootEntries)
	s.scanEntries("", rootEntries, next, seen)
	for _, p := range platforms {
		s.scanEntries(p, s.readDir(p), next, seen)
	}
	for p := range s.hashes {
		if !seen[p] {
			delete(s.hashes, p)
		}
	}
	for p := range s.rejected {
		if !seen[p] {
			delete(s.rejected, p)
		}
	}
	sort.Slice(next.binaries, func(i, j int) bool {
		a, b := next.binaries[i], next.binaries[j]
		if a.Platform != b.Platform {
			return a.Platform < b.Platform
		}
		return a.Name < b.Name
	})

	prev := s.current.Swap(next)
	s.logChanges(prev, next)
	if s.onIndex != nil {
		s.onIndex(len(next.binaries))
	}
	return platforms
}

func (s *Store) readDir(dir string) []fs.DirEntry {
	entries, err := fs.ReadDir(s.root.FS(), dir)
	if err != nil {
		s.log.Error().Err(err).Str("path", dir).Msg("cannot read update directory")
	}
	return entries
}

func (s *Store) scanEntries(platform string, entries []fs.DirEntry, next *index, seen map[string]bool) {
	for _, e := range entries {
		name := e.Name()
		if !isBinaryName(name) {
			continue
		}
		rel := path.Join(platform, name)
		seen[rel] = true
		b, err := s.load(platform, name)
		if err != nil {
			if errors.Is(err, errInProgress) {
				s.log.Debug().Str("file", rel).Msg("binary is still being written; will look again")
				continue
			}
			if s.rejected[rel] != err.Error() {
				s.rejected[rel] = err.Error()
				s.log.Error().Str("file", rel).Str("reason", err.Error()).Msg("binary rejected: not listed and not served")
			}
			continue
		}
		delete(s.rejected, rel)
		next.binaries = append(next.binaries, b)
		next.files[rel] = fileRef{binary: b, kind: kindBinary}
		next.files[rel+sumSuffix] = fileRef{binary: b, kind: kindSum}
		if b.Signed {
			next.files[rel+sigSuffix] = fileRef{binary: b, kind: kindSig}
		}
	}
}

// isBinaryName tells MinIO binaries from their sidecars and from anything
// else that may sit in the directory (hidden temporary files among them).
func isBinaryName(name string) bool {
	return strings.HasPrefix(name, "minio.") && validFileName(name) &&
		!strings.HasSuffix(name, sumSuffix) && !strings.HasSuffix(name, sigSuffix)
}

var errInProgress = errors.New("file changed while it was read")

func (s *Store) load(platform, name string) (*Binary, error) {
	rel := path.Join(platform, name)
	sumData, err := s.readSmall(rel+sumSuffix, maxSumFileSize)
	if err != nil {
		return nil, fmt.Errorf("no usable %s: %w", name+sumSuffix, err)
	}
	want, sumName, err := ParseSHA256Sum(sumData)
	if err != nil {
		return nil, fmt.Errorf("malformed %s: %w", name+sumSuffix, err)
	}
	if sumName != name {
		return nil, fmt.Errorf("%s names %q, not %q", name+sumSuffix, sumName, name)
	}

	// root.Stat follows symlinks only while they stay inside the store.
	info, err := s.root.Stat(rel)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	h, err := s.hash(rel, info, platform == "")
	if err != nil {
		return nil, err
	}
	digest := h.digest
	if digest != want {
		return nil, fmt.Errorf("checksum mismatch: file has sha256 %s, %s says %s", digest, name+sumSuffix, want)
	}

	b := &Binary{
		Name:    name,
		Release: strings.TrimPrefix(name, "minio."),
		Size:    info.Size(),
		ModTime: info.ModTime(),
		SHA256:  digest,
		info:    info,
		sum:     sumData,
		sumETag: `"` + contentETag(sumData) + `"`,
	}
	if platform != "" {
		b.Platform = platform
		b.OS, b.Arch, _ = strings.Cut(platform, "-")
	} else {
		b.OS, b.Arch = h.os, h.arch
	}
	sig, err := s.readSmall(rel+sigSuffix, maxSigFileSize)
	switch {
	case err == nil:
		b.sig, b.Signed, b.sigETag = sig, true, `"`+contentETag(sig)+`"`
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("unreadable %s: %w", name+sigSuffix, err)
	}
	return b, nil
}

// hash returns the file's SHA-256 and, when wantPlatform (binaries at the
// root, with no <os>-<arch> directory to tell), the platform its ELF header
// names. Both are read once and kept while the file stays the same.
func (s *Store) hash(rel string, info os.FileInfo, wantPlatform bool) (hashed, error) {
	if h, ok := s.hashes[rel]; ok && sameFile(h.info, info) {
		return h, nil
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return hashed{}, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return hashed{}, fmt.Errorf("read: %w", err)
	}
	after, err := f.Stat()
	if err != nil {
		return hashed{}, fmt.Errorf("stat: %w", err)
	}
	if !sameFile(info, after) {
		return hashed{}, errInProgress
	}
	h := hashed{info: info, digest: hex.EncodeToString(sum.Sum(nil))}
	if wantPlatform {
		h.os, h.arch = elfPlatform(f)
	}
	s.hashes[rel] = h
	return h, nil
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

func (s *Store) logChanges(prev, next *index) {
	old := map[string]*Binary{}
	if prev != nil {
		for _, b := range prev.binaries {
			old[b.Path()] = b
		}
	}
	for _, b := range next.binaries {
		if o, ok := old[b.Path()]; ok && o.SHA256 == b.SHA256 && bytes.Equal(o.sig, b.sig) {
			delete(old, b.Path())
			continue
		}
		delete(old, b.Path())
		s.log.Info().Str("file", b.Path()).Str("release", b.Release).Str("platform", b.OS+"/"+b.Arch).
			Int64("size", b.Size).Str("sha256", b.SHA256).Bool("signed", b.Signed).Msg("binary indexed")
	}
	for p := range old {
		s.log.Info().Str("file", p).Msg("binary no longer served")
	}
}

// errChanged means a binary's file changed after it was indexed; the store
// rescans and the client should retry.
var errChanged = errors.New("binary changed since it was indexed")

// open returns the indexed binary's file, refusing a file that was replaced
// or modified after indexing so a half-written or unverified binary is
// never served.
func (s *Store) open(b *Binary) (*os.File, error) {
	f, err := s.root.Open(b.Path())
	if err != nil {
		s.Rescan()
		return nil, fmt.Errorf("%w: %v", errChanged, err)
	}
	info, err := f.Stat()
	if err != nil || !sameFile(b.info, info) {
		f.Close()
		s.Rescan()
		return nil, errChanged
	}
	return f, nil
}

// Close releases the store directory.
func (s *Store) Close() error { return s.root.Close() }
