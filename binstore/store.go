// Package binstore owns the binary store: a directory of MinIO binaries,
// each under <os>-<arch>/sha256/<hex>/ with its .sha256sum and .minisig
// (as MinIO's in-place update client reads them) and where it came from.
//
// The store is content-addressed and has one writer, this process: the
// directory is read once, at start (Run); then the index changes in
// memory as the writer commits, publishes or removes. Every other URL (a
// release's plain path, a tenant's) is a view of the index, never a copy
// on disk. Each replica fills its own directory: nothing is shared or
// locked across processes.
//
// Nothing unverified is indexed: MinIO's update client refuses a binary
// whose bytes do not match its .sha256sum or whose .minisig no trusted
// key verifies.
package binstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"aead.dev/minisign"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/internal/reason"
)

// Options configure a Store.
type Options struct {
	// TrustedKeys verify every binary's .minisig; empty trusts nothing.
	TrustedKeys []minisign.PublicKey
	// Signer, if set, signs binaries committed without a signature from a
	// source that allows it (Candidate.Signable); its key is trusted too.
	Signer *minisign.PrivateKey
	// Registerer receives the store's gauges; nil registers nothing.
	Registerer prometheus.Registerer
}

// Store indexes a directory of MinIO binaries and is its only writer.
type Store struct {
	dir     string
	root    *os.Root
	log     zerolog.Logger
	opts    Options
	trusted []minisign.PublicKey

	current atomic.Pointer[Snapshot]
	// mu makes a comparison and the landing it decides one step.
	mu       sync.Mutex
	rejected map[string]string // file -> why it was refused
	// scanned is closed once the start's scan removed what an
	// interrupted landing left: nothing is staged before.
	scanned   chan struct{}
	closeOnce sync.Once
}

// New opens (and creates if needed) the store directory; Run indexes it.
func New(dir string, log zerolog.Logger, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open store directory %s: %w", dir, err)
	}
	trusted := slices.Clone(opts.TrustedKeys)
	if opts.Signer != nil {
		trusted = append(trusted, opts.Signer.Public().(minisign.PublicKey))
	}
	s := &Store{dir: dir, root: root, log: log.With().Str("component", "binstore").Str("dir", dir).Logger(),
		opts: opts, trusted: trusted, rejected: map[string]string{}, scanned: make(chan struct{})}
	if opts.Registerer == nil {
		return s, nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "objectstore_operator_upgrade_binaries",
			Help: "Binaries currently listed by the upgrade server (verified and signed).",
		}, func() float64 { return float64(len(s.Current().Binaries())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "objectstore_operator_store_size_bytes",
			Help: "Total size of the distinct binaries the store holds (each digest once, whatever release names point at it).",
		}, func() float64 { return float64(s.Current().StoredBytes()) }),
	} {
		if err := opts.Registerer.Register(c); err != nil {
			root.Close()
			return nil, fmt.Errorf("register store metrics: %w", err)
		}
	}
	return s, nil
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

var emptySnapshot = index(nil)

// Current returns the latest snapshot, empty before the start's scan.
func (s *Store) Current() *Snapshot {
	if snap := s.current.Load(); snap != nil {
		return snap
	}
	return emptySnapshot
}

// Ready reports whether the store has been indexed.
func (s *Store) Ready() error {
	if s.current.Load() == nil {
		return errors.New("binary store not indexed yet")
	}
	return nil
}

// Run indexes the store once (Scan); the writer keeps it current.
func (s *Store) Run(context.Context) error {
	s.Scan()
	return nil
}

// change swaps in the index of what edit makes of the binaries (under mu).
func (s *Store) change(edit func(all []*Binary) []*Binary) {
	prev := s.Current()
	next := index(edit(slices.Clone(prev.all)))
	s.current.Store(next)
	s.logChanges(prev, next)
}

// reject records and logs a file refused; the caller holds mu.
func (s *Store) reject(rel string, err error) {
	s.rejected[rel] = err.Error()
	s.log.Error().Str("file", rel).Str("reason", reason.Of(err)).Err(err).Msg("binary rejected: not listed and not served")
}

// ErrChanged: the file changed since it was indexed and still verifies; retry.
var ErrChanged = errors.New("binary changed since it was indexed")

// Open returns the indexed binary's file. A file changed since it was
// indexed (by hand: the store never rewrites one) is verified again, so a
// half-written or unverified binary is never served: one that still
// verifies replaces the indexed one (ErrChanged), one that does not is
// dropped (fs.ErrNotExist).
func (s *Store) Open(b *Binary) (*os.File, error) {
	f, err := s.root.Open(b.Path())
	if err == nil {
		info, serr := f.Stat()
		if serr == nil && sameFile(b.info, info) {
			return f, nil
		}
		f.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	again, err := s.load(b.Platform, path.Dir(b.rel), b.Name)
	// Views of the file were made for its old bytes: they go, and their
	// ObjectStores' next syncs publish them again.
	s.change(func(all []*Binary) []*Binary {
		all = slices.DeleteFunc(all, func(o *Binary) bool { return o.rel == b.rel })
		if err == nil {
			all = append(all, again)
		}
		return all
	})
	if err != nil {
		s.reject(b.rel, err)
		return nil, fmt.Errorf("%s: %w (%w)", b.rel, fs.ErrNotExist, err)
	}
	return nil, ErrChanged
}

// sameFile reports whether b is a as it was: same inode, size and mtime.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// RemoveBinary deletes one indexed binary and its sidecars, the
// .sha256sum first, and its digest directory once empty; other release
// names of the same bytes (hard links) stay. A view has no files: it, and
// the views of a removed file, only leave the index.
func (s *Store) RemoveBinary(b *Binary) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.component == "" {
		base := filepath.Join(s.dir, filepath.FromSlash(b.Path()))
		for _, p := range []string{base + SHA256SumSuffix, base, base + MinisigSuffix, base + sourceSuffix} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove %s: %w", p, err)
			}
		}
		if b.inDigestDir() {
			_ = os.Remove(filepath.Dir(base)) // fails while other names remain
		}
	}
	s.change(func(all []*Binary) []*Binary {
		return slices.DeleteFunc(all, func(o *Binary) bool { return o == b || (b.component == "" && o.rel == b.rel) })
	})
	return nil
}

// Close releases the store directory.
func (s *Store) Close() error { return s.root.Close() }
