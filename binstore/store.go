// Package binstore owns the binary store: a directory of MinIO binaries in
// the layout MinIO's in-place update client expects (minio.<RELEASE>, its
// .sha256sum and .minisig, under <os>-<arch>/), with where each came from.
//
// Nothing unverified is ever indexed: a binary is listed only when its
// bytes match its .sha256sum and its .minisig verifies against one of the
// trusted minisign keys, because MinIO's update client refuses anything
// else. Writers land binaries through Stage and Commit, which verify
// before anything becomes visible and refuse to replace a release with
// other bytes; readers (the upgrade server) see immutable Snapshots.
//
// Data flows one way: sources (binsource) -> binstore -> upgradeserver.
package binstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"aead.dev/minisign"
	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

const (
	// maxSigFileSize bounds a .minisig file; a real one is about 300 bytes.
	maxSigFileSize = 4096
	// maxSourceFileSize bounds a provenance file.
	maxSourceFileSize = 8192
)

// Binary is a MinIO binary the store serves: its bytes matched its
// .sha256sum and its .minisig verified when it was indexed.
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
	// SHA256 is the lower-case hex digest, verified against the .sha256sum
	// (and, in a digest directory, against the directory's name).
	SHA256 string
	// KeyID is the id of the trusted minisign key that verified the
	// .minisig, as minisign prints it.
	KeyID string
	// Source is where the operator took the binary from; nil for a binary
	// put into the directory by other means.
	Source *Source

	rel string // the file's path below the store root
	// component is the tenant directory's name for a binary published for
	// one ObjectStore (sha256/<hex>/<component>/), "" elsewhere.
	component string
	info      os.FileInfo
	sum       []byte
	sig       []byte
}

// Path is the binary's file below the store root, e.g.
// linux-amd64/sha256/<hex>/minio.RELEASE.X or linux-amd64/minio.RELEASE.X.
func (b *Binary) Path() string { return b.rel }

// inDigestDir reports whether the file sits in a digest directory (the
// store's own) rather than at a plain path (possibly placed by hand).
func (b *Binary) inDigestDir() bool { return path.Dir(b.rel) != path.Clean(b.Platform) }

// private reports whether the binary came only from a source that needed
// credentials: it is served at no public path, only below a tenant's
// component (see Store.Publish).
func (b *Binary) private() bool { return b.Source != nil && b.Source.Private }

// Private reports whether the binary is served only at its tenants' URLs.
func (b *Binary) Private() bool { return b.component != "" || b.private() }

// PlatformSigned reports whether the binary's signature was made by the
// platform key (its source shipped none): each ObjectStore is then given
// its own copy, signed for it (Store.Publish).
func (b *Binary) PlatformSigned() bool { return b.Source != nil && b.Source.SignedBy != "" }

// Published reports whether the file is a copy published for one
// ObjectStore (Store.Publish).
func (b *Binary) Published() bool { return b.component != "" }

// URLPath is where this file is served below the update path: its tenant
// path sha256/<hex>/<component>/minio.<RELEASE> when it was published for
// one ObjectStore, else its digest path.
func (b *Binary) URLPath() string {
	if b.component != "" {
		return digestDirName + "/" + b.SHA256 + "/" + b.component + "/" + b.Name
	}
	return b.DigestPath()
}

// PlainPath is where the release is served by name alone,
// <os>-<arch>/minio.<RELEASE> (or minio.<RELEASE> at the root), when every
// source of the release agrees on its bytes.
func (b *Binary) PlainPath() string { return path.Join(b.Platform, b.Name) }

// DigestPath is where exactly these bytes are served under this release
// name: sha256/<hex>/minio.<RELEASE>.
func (b *Binary) DigestPath() string { return DigestPath(b.SHA256, b.Release) }

// SHA256Sum is the content of the binary's .sha256sum file.
func (b *Binary) SHA256Sum() []byte { return b.sum }

// Minisig is the content of the binary's .minisig file.
func (b *Binary) Minisig() []byte { return b.sig }

// Kind says which of a binary's files a store path names.
type Kind int

// The files of one binary.
const (
	KindBinary Kind = iota
	KindSHA256Sum
	KindMinisig
)

// File is one servable file: a binary or one of its sidecars.
type File struct {
	Binary *Binary
	Kind   Kind
}

// Withheld is a release claimed with different bytes: it is served only at
// each binary's digest path, never at the plain path.
type Withheld struct {
	// Platform is the <os>-<arch> directory ("" at the root).
	Platform string
	Release  string
	// SHA256s are the digests claiming the release, sorted.
	SHA256s []string
}

// Reason says in one line why the release has no plain path.
func (w Withheld) Reason() string {
	return fmt.Sprintf("%d different binaries claim this release name; each is served only at its own digest URL (sha256/<hex>/minio.%s)", len(w.SHA256s), w.Release)
}

// Snapshot is an immutable view of the store; a rescan builds a new one
// and swaps it in whole, so readers never see a half-updated index.
type Snapshot struct {
	// all is every indexed binary file; plain the releases served by name
	// (every claim agrees on the bytes); withheld the others.
	all      []*Binary
	plain    []*Binary
	withheld []Withheld
	files    map[string]File
	claims   map[string][]*Binary // PlainPath -> every binary claiming it
	// tenant holds the binaries published for one ObjectStore, by
	// <hex>/minio.<RELEASE>; they are found only with their component.
	tenant map[string][]*Binary
}

// Binaries returns the releases served at their plain paths (every source
// agrees on the bytes), sorted by platform and name. The slice and its
// elements must not be modified.
func (s *Snapshot) Binaries() []*Binary { return s.plain }

// All returns every indexed binary file, digest directories included.
func (s *Snapshot) All() []*Binary { return s.all }

// Withheld returns the releases claimed with different bytes.
func (s *Snapshot) Withheld() []Withheld { return s.withheld }

// Lookup finds the file at a served path such as
// linux-amd64/minio.X.sha256sum or sha256/<hex>/minio.X.minisig.
func (s *Snapshot) Lookup(rel string) (File, bool) {
	f, ok := s.files[rel]
	return f, ok
}

// TenantFile finds a file published for one ObjectStore:
// sha256/<digest>/<component>/<name>. The component is compared in
// constant time with every candidate's, so how long the answer takes says
// nothing about how much of a guess was right.
func (s *Snapshot) TenantFile(digest, component, name string) (File, bool) {
	kind, bin := KindBinary, name
	switch {
	case strings.HasSuffix(name, SHA256SumSuffix):
		kind, bin = KindSHA256Sum, strings.TrimSuffix(name, SHA256SumSuffix)
	case strings.HasSuffix(name, MinisigSuffix):
		kind, bin = KindMinisig, strings.TrimSuffix(name, MinisigSuffix)
	}
	var found *Binary
	for _, b := range s.tenant[digest+"/"+bin] {
		if subtle.ConstantTimeCompare([]byte(b.component), []byte(component)) == 1 {
			found = b
		}
	}
	if found == nil || !validDigest(component) {
		return File{}, false
	}
	return File{Binary: found, Kind: kind}, true
}

// At finds the binary served at a path below the update path: a digest
// path, a tenant's path or a plain path; nil when none is served there.
func (s *Snapshot) At(rel string) *Binary {
	parts := strings.Split(rel, "/")
	var f File
	var ok bool
	if len(parts) == 4 && parts[0] == digestDirName {
		f, ok = s.TenantFile(parts[1], parts[2], parts[3])
	} else {
		f, ok = s.files[rel]
	}
	if !ok || f.Kind != KindBinary {
		return nil
	}
	return f.Binary
}

// Binary returns the release's binary served at its plain path for
// platform ("" for the root), or nil (none, or claimed with other bytes).
func (s *Snapshot) Binary(platform, release string) *Binary {
	f, ok := s.files[path.Join(platform, "minio."+release)]
	if !ok || f.Kind != KindBinary {
		return nil
	}
	return f.Binary
}

// ByDigest returns the binary whose SHA-256 is digest stored under
// release, or nil.
func (s *Snapshot) ByDigest(digest, release string) *Binary {
	f, ok := s.files[DigestPath(digest, release)]
	if !ok || f.Kind != KindBinary {
		return nil
	}
	return f.Binary
}

// Claims returns every binary stored under the release for platform,
// whatever its bytes, private ones included (never served by name).
func (s *Snapshot) Claims(platform, release string) []*Binary {
	return s.claims[path.Join(platform, "minio."+release)]
}

// StoredBytes is the size of the distinct binaries (each digest and
// platform once, however many names point at it).
func (s *Snapshot) StoredBytes() int64 {
	seen := map[string]bool{}
	var total int64
	for _, b := range s.all {
		if k := b.Platform + "/" + b.SHA256; !seen[k] {
			seen[k] = true
			total += b.Size
		}
	}
	return total
}

// Options configure a Store.
type Options struct {
	// TrustedKeys verify every binary's .minisig; a binary no key verifies
	// is never indexed. Empty trusts nothing.
	TrustedKeys []minisign.PublicKey
	// Signer, if set, signs binaries committed without a signature from a
	// source that allows it (see Candidate.Signable); its public key is
	// trusted as well.
	Signer *minisign.PrivateKey
	// ScanInterval re-reads the directory even without file events, in
	// case an event was missed (network file systems). Default 30s.
	ScanInterval time.Duration
	// Debounce waits for a burst of file events to settle. Default 200ms.
	Debounce time.Duration
	// Registerer receives the store's gauges; nil registers nothing.
	Registerer prometheus.Registerer
}

// Store indexes a directory of MinIO binaries. The index is rebuilt when
// files appear, change or go.
type Store struct {
	dir     string
	root    *os.Root
	log     zerolog.Logger
	opts    Options
	trusted []minisign.PublicKey

	current atomic.Pointer[Snapshot]
	kick    chan struct{}

	scanMu   sync.Mutex
	hashes   map[string]hashed // guarded by scanMu
	rejected map[string]string // guarded by scanMu: last reason logged per file
}

// hashed is what indexing learned from reading a file, kept while the file
// and its signature stay the same.
type hashed struct {
	info     os.FileInfo
	digest   string
	os, arch string // from the ELF header
	sig      []byte // the signature the verdict is for
	keyID    string
	sigErr   error
}

// sameFile reports whether b is a as it was: same inode, size and mtime.
func sameFile(a, b os.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// New opens (and creates if needed) the store directory. Call Run to index
// it and keep the index current.
func New(dir string, log zerolog.Logger, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open store directory %s: %w", dir, err)
	}
	if opts.ScanInterval <= 0 {
		opts.ScanInterval = 30 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 200 * time.Millisecond
	}
	trusted := append([]minisign.PublicKey(nil), opts.TrustedKeys...)
	if opts.Signer != nil {
		trusted = append(trusted, opts.Signer.Public().(minisign.PublicKey))
	}
	s := &Store{
		dir:      dir,
		root:     root,
		log:      log.With().Str("component", "binstore").Str("dir", dir).Logger(),
		opts:     opts,
		trusted:  trusted,
		kick:     make(chan struct{}, 1),
		hashes:   map[string]hashed{},
		rejected: map[string]string{},
	}
	if opts.Registerer != nil {
		if err := s.register(opts.Registerer); err != nil {
			root.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) register(reg prometheus.Registerer) error {
	count := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "objectstore_operator_upgrade_binaries",
		Help: "Binaries currently listed by the upgrade server (verified and signed).",
	}, func() float64 { return float64(len(s.Current().Binaries())) })
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "objectstore_operator_store_size_bytes",
		Help: "Total size of the distinct binaries the store holds (each digest once, whatever release names point at it).",
	}, func() float64 {
		return float64(s.Current().StoredBytes())
	})
	for _, c := range []prometheus.Collector{count, size} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register store metrics: %w", err)
		}
	}
	return nil
}

// Signs reports whether the store has a platform key to sign with.
func (s *Store) Signs() bool { return s.opts.Signer != nil }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// TrustedKeyIDs lists the ids of the keys signatures are verified with.
func (s *Store) TrustedKeyIDs() []string {
	ids := make([]string, len(s.trusted))
	for i, k := range s.trusted {
		ids[i] = FormatKeyID(k.ID())
	}
	return ids
}

var emptySnapshot = &Snapshot{files: map[string]File{}, claims: map[string][]*Binary{}, tenant: map[string][]*Binary{}}

// Current returns the latest snapshot; before the first scan it is empty
// (Ready tells the difference).
func (s *Store) Current() *Snapshot {
	if snap := s.current.Load(); snap != nil {
		return snap
	}
	return emptySnapshot
}

// Ready reports whether the store has been indexed at least once.
func (s *Store) Ready() error {
	if s.current.Load() == nil {
		return errors.New("binary store not indexed yet")
	}
	return nil
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
		if e.IsDir() && ValidPlatform(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// Scan re-indexes the store now, swaps the new snapshot in and returns the
// directories it found (relative to the store: <os>-<arch> and their
// digest directories), for watching. Binaries are read only when their
// size, modification time, inode or signature changed.
func (s *Store) Scan() []string {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()

	var all []*Binary
	seen := map[string]bool{}
	rootEntries := s.readDir(".")
	platforms := platformsIn(rootEntries)
	dirs := append([]string(nil), platforms...)
	all = s.scanEntries("", "", rootEntries, all, seen)
	for _, p := range platforms {
		all = s.scanEntries(p, p, s.readDir(p), all, seen)
		digestRoot := path.Join(p, digestDirName)
		if info, err := s.root.Lstat(digestRoot); err != nil || !info.IsDir() {
			continue
		}
		dirs = append(dirs, digestRoot)
		for _, e := range s.readDir(digestRoot) {
			if !e.IsDir() || !validDigest(e.Name()) {
				continue
			}
			d := path.Join(digestRoot, e.Name())
			dirs = append(dirs, d)
			entries := s.readDir(d)
			all = s.scanEntries(p, d, entries, all, seen)
			// Tenant directories: the binary published for one
			// ObjectStore, named by its component.
			for _, te := range entries {
				if te.IsDir() && validDigest(te.Name()) {
					td := path.Join(d, te.Name())
					dirs = append(dirs, td)
					all = s.scanEntries(p, td, s.readDir(td), all, seen)
				}
			}
		}
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
	next := index(all)
	prev := s.current.Swap(next)
	s.logChanges(prev, next)
	return dirs
}

// index builds a snapshot from every verified binary file: each is served
// at its digest path; a release is served at its plain path only when
// every binary claiming it has the same bytes.
func index(all []*Binary) *Snapshot {
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Platform != b.Platform {
			return a.Platform < b.Platform
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		// A file at the plain path (placed by hand) represents its
		// release before a digest directory's.
		return a.rel < b.rel
	})
	next := &Snapshot{all: all, files: map[string]File{}, claims: map[string][]*Binary{}, tenant: map[string][]*Binary{}}
	add := func(key string, b *Binary) {
		next.files[key] = File{Binary: b, Kind: KindBinary}
		next.files[key+SHA256SumSuffix] = File{Binary: b, Kind: KindSHA256Sum}
		next.files[key+MinisigSuffix] = File{Binary: b, Kind: KindMinisig}
	}
	// Binaries published for one ObjectStore are found only with their
	// component; private ones (their source needed credentials) are
	// claims the fetcher reuses but are served at no public path.
	var order []string
	var public []*Binary
	for _, b := range all {
		if b.component != "" {
			k := b.SHA256 + "/" + b.Name
			next.tenant[k] = append(next.tenant[k], b)
			continue
		}
		key := b.PlainPath()
		next.claims[key] = append(next.claims[key], b)
		if b.private() {
			continue
		}
		if !slices.ContainsFunc(public, func(o *Binary) bool { return o.PlainPath() == key }) {
			order = append(order, key)
		}
		public = append(public, b)
	}
	publicClaims := map[string][]*Binary{}
	for _, b := range public {
		publicClaims[b.PlainPath()] = append(publicClaims[b.PlainPath()], b)
	}
	// Every binary is served at its digest path, the store's own copy
	// first: a file placed by hand with the same bytes serves only when no
	// digest directory has them. The same bytes under two platform
	// directories (a mislabelled index) are still those bytes: the first
	// found serves.
	for _, own := range []bool{true, false} {
		for _, b := range public {
			if _, taken := next.files[b.DigestPath()]; !taken && b.inDigestDir() == own {
				add(b.DigestPath(), b)
			}
		}
	}
	for _, key := range order {
		claims := publicClaims[key]
		var digests []string
		for _, b := range claims {
			if !slices.Contains(digests, b.SHA256) {
				digests = append(digests, b.SHA256)
			}
		}
		if len(digests) > 1 {
			sort.Strings(digests)
			next.withheld = append(next.withheld, Withheld{Platform: claims[0].Platform, Release: claims[0].Release, SHA256s: digests})
			continue
		}
		next.plain = append(next.plain, claims[0])
		add(key, claims[0])
	}
	return next
}

func (s *Store) readDir(dir string) []fs.DirEntry {
	entries, err := fs.ReadDir(s.root.FS(), dir)
	if err != nil {
		s.log.Error().Err(err).Str("path", dir).Msg("cannot read store directory")
	}
	return entries
}

// scanEntries indexes the binaries among entries of dir, a platform
// directory (or the root) or one of its digest directories.
func (s *Store) scanEntries(platform, dir string, entries []fs.DirEntry, all []*Binary, seen map[string]bool) []*Binary {
	for _, e := range entries {
		name := e.Name()
		if !isBinaryName(name) {
			continue
		}
		rel := path.Join(dir, name)
		seen[rel] = true
		b, err := s.load(platform, dir, name)
		if err != nil {
			if errors.Is(err, errInProgress) {
				s.log.Debug().Str("file", rel).Msg("binary is still being written; will look again")
				continue
			}
			if s.rejected[rel] != err.Error() {
				s.rejected[rel] = err.Error()
				s.log.Error().Str("file", rel).Str("reason", string(ReasonOf(err))).Err(err).
					Msg("binary rejected: not listed and not served")
			}
			continue
		}
		delete(s.rejected, rel)
		all = append(all, b)
	}
	return all
}

var errInProgress = errors.New("file changed while it was read")

func (s *Store) load(platform, dir, name string) (*Binary, error) {
	rel := path.Join(dir, name)
	sumData, err := s.readSmall(rel+SHA256SumSuffix, maxSumFileSize)
	if err != nil {
		return nil, fmt.Errorf("no usable %s: %w", name+SHA256SumSuffix, err)
	}
	want, sumName, err := ParseSHA256Sum(sumData)
	if err != nil {
		return nil, fmt.Errorf("malformed %s: %w", name+SHA256SumSuffix, err)
	}
	if sumName != name {
		return nil, fmt.Errorf("%s names %q, not %q", name+SHA256SumSuffix, sumName, name)
	}
	sig, err := s.readSmall(rel+MinisigSuffix, maxSigFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Reason: ReasonUnsigned, Err: fmt.Errorf("no %s beside the binary: MinIO's update client would refuse it", name+MinisigSuffix)}
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
	h, err := s.hash(rel, info, sig, platform == "")
	if err != nil {
		return nil, err
	}
	if h.digest != want {
		return nil, &Error{Reason: ReasonChecksumMismatch, Err: fmt.Errorf("file has sha256 %s, %s says %s", h.digest, name+SHA256SumSuffix, want)}
	}
	// A digest directory (and a tenant directory in it) holds exactly the
	// bytes it is named after: a digest path never serves other bytes,
	// whatever was put there.
	var component string
	if dir != platform {
		parts := strings.Split(dir, "/")
		if len(parts) == 4 {
			component = parts[3]
		}
		if len(parts) < 3 || parts[2] != h.digest {
			return nil, &Error{Reason: ReasonChecksumMismatch, Err: fmt.Errorf("file has sha256 %s but sits in the directory of %s", h.digest, dir)}
		}
	}
	if h.sigErr != nil {
		return nil, h.sigErr
	}

	b := &Binary{
		Name:      name,
		Release:   strings.TrimPrefix(name, "minio."),
		Size:      info.Size(),
		ModTime:   info.ModTime(),
		SHA256:    h.digest,
		KeyID:     h.keyID,
		rel:       rel,
		component: component,
		info:      info,
		sum:       sumData,
		sig:       sig,
	}
	if platform != "" {
		b.Platform = platform
		b.OS, b.Arch, _ = strings.Cut(platform, "-")
	} else {
		b.OS, b.Arch = h.os, h.arch
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

// hash reads the file once for its SHA-256, the verdict on sig and, when
// wantPlatform (binaries at the root, with no <os>-<arch> directory to
// tell), the platform its ELF header names. The result is kept while the
// file and the signature stay the same.
func (s *Store) hash(rel string, info os.FileInfo, sig []byte, wantPlatform bool) (hashed, error) {
	if h, ok := s.hashes[rel]; ok && sameFile(h.info, info) && bytes.Equal(h.sig, sig) {
		return h, nil
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return hashed{}, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	prehash := minisign.NewReader(f)
	if _, err := io.Copy(sum, prehash); err != nil {
		return hashed{}, fmt.Errorf("read: %w", err)
	}
	after, err := f.Stat()
	if err != nil {
		return hashed{}, fmt.Errorf("stat: %w", err)
	}
	if !sameFile(info, after) {
		return hashed{}, errInProgress
	}
	h := hashed{info: info, digest: hex.EncodeToString(sum.Sum(nil)), sig: sig}
	h.keyID, h.sigErr = s.verify(prehash, sig)
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

func (s *Store) logChanges(prev, next *Snapshot) {
	old := map[string]*Binary{}
	if prev != nil {
		for _, b := range prev.all {
			old[b.Path()] = b
		}
	}
	for _, w := range next.withheld {
		if prev == nil || !slices.ContainsFunc(prev.withheld, func(p Withheld) bool {
			return p.Platform == w.Platform && p.Release == w.Release && slices.Equal(p.SHA256s, w.SHA256s)
		}) {
			s.log.Warn().Str("platform", w.Platform).Str("release", w.Release).Strs("sha256", w.SHA256s).
				Str("reason", "ReleaseClaimedWithOtherBytes").Msg("release claimed with different binaries: served only at each digest URL, not at its plain path")
		}
	}
	for _, b := range next.all {
		if o, ok := old[b.Path()]; ok && o.SHA256 == b.SHA256 && bytes.Equal(o.sig, b.sig) {
			delete(old, b.Path())
			continue
		}
		delete(old, b.Path())
		ev := s.log.Info().Str("file", b.Path()).Str("release", b.Release).Str("platform", b.OS+"/"+b.Arch).
			Int64("size", b.Size).Str("sha256", b.SHA256).Str("keyId", b.KeyID)
		if b.Source != nil {
			ev = ev.Str("source", b.Source.String())
		}
		ev.Msg("binary indexed")
	}
	for p := range old {
		s.log.Info().Str("file", p).Msg("binary no longer served")
	}
}

// ErrChanged means a binary's file changed after it was indexed; the store
// rescans and the client should retry.
var ErrChanged = errors.New("binary changed since it was indexed")

// Open returns the indexed binary's file, refusing a file that was replaced
// or modified after indexing so a half-written or unverified binary is
// never served.
func (s *Store) Open(b *Binary) (*os.File, error) {
	f, err := s.root.Open(b.Path())
	if err != nil {
		s.Rescan()
		return nil, fmt.Errorf("%w: %v", ErrChanged, err)
	}
	info, err := f.Stat()
	if err != nil || !sameFile(b.info, info) {
		f.Close()
		s.Rescan()
		return nil, ErrChanged
	}
	return f, nil
}

// Close releases the store directory.
func (s *Store) Close() error { return s.root.Close() }
