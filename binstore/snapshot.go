package binstore

import (
	"cmp"
	"crypto/subtle"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Binary is a MinIO binary the store serves: its bytes matched its
// .sha256sum and its .minisig verified when it was indexed.
type Binary struct {
	Name, Release string // minio.<RELEASE>, <RELEASE>
	Platform      string // the <os>-<arch> subdirectory, "" at the root
	// OS and Arch come from the subdirectory or, at the root, from the ELF
	// header; empty when neither tells.
	OS, Arch string
	Size     int64
	ModTime  time.Time
	SHA256   string  // lower-case hex, verified (and against a digest directory's name)
	KeyID    string  // the trusted key's that verified the .minisig, as minisign prints it
	Source   *Source // nil for a binary put into the directory by other means

	rel string // the file's path below the store root
	// component is the tenant's part of the URL of a view published for
	// one ObjectStore, "" elsewhere: the view is rel's file with its own
	// provenance and signature, in memory only.
	component string
	info      os.FileInfo
	sum, sig  []byte
	// also are other images' platform manifests whose commits found these
	// bytes stored, most recent last, in memory only.
	also []fromManifest
}

// fromManifest is an image's platform manifest known to hold a binary.
type fromManifest struct {
	manifest string
	unsigned bool // the image shipped no signature for it
}

// maxAlso bounds the manifests remembered per binary: tenants choose
// manifests. Forgetting one costs a second pull, never a wrong answer.
const maxAlso = 64

// FromManifest reports whether an image's platform manifest is known to
// hold these bytes, and whether that image shipped no signature for them:
// its ObjectStores are then each given a copy the platform key signs for
// them (Store.Publish), whatever signature the stored binary has.
func (b *Binary) FromManifest(manifest string) (known, unsigned bool) {
	if b.Source != nil && b.Source.ManifestDigest == manifest {
		return true, b.PlatformSigned()
	}
	for _, m := range b.also {
		if m.manifest == manifest {
			return true, m.unsigned
		}
	}
	return false, false
}

// remember returns b's manifests with m added (the oldest go past maxAlso).
func (b *Binary) remember(m fromManifest) []fromManifest {
	also := slices.DeleteFunc(slices.Clone(b.also), func(o fromManifest) bool { return o.manifest == m.manifest })
	also = append(also, m)
	return also[max(0, len(also)-maxAlso):]
}

func (b *Binary) setPlatform(platform string) {
	if platform != "" {
		b.Platform = platform
		b.OS, b.Arch, _ = strings.Cut(platform, "-")
	}
}

// Path is the binary's file below the store root.
func (b *Binary) Path() string { return b.rel }

// inDigestDir reports whether the file sits in a digest directory (the
// store's own) rather than at a plain path (possibly placed by hand).
func (b *Binary) inDigestDir() bool { return path.Dir(b.rel) != path.Clean(b.Platform) }

// private: the binary came only from a source that needed credentials.
func (b *Binary) private() bool { return b.Source != nil && b.Source.Private }

// Private reports whether the binary is served only at its tenants' URLs.
func (b *Binary) Private() bool { return b.component != "" || b.private() }

// PlatformSigned reports whether the platform key made the binary's
// signature (its source shipped none).
func (b *Binary) PlatformSigned() bool { return b.Source != nil && b.Source.SignedBy != "" }

// Published reports whether the binary is a view (Store.Publish).
func (b *Binary) Published() bool { return b.component != "" }

// URLPath is where this file is served below the update path: a view's
// sha256/<hex>/<component>/minio.<RELEASE>, else its digest path.
func (b *Binary) URLPath() string {
	if b.component != "" {
		return digestDirName + "/" + b.SHA256 + "/" + b.component + "/" + b.Name
	}
	return b.DigestPath()
}

// PlainPath is where the release is served by name alone,
// <os>-<arch>/minio.<RELEASE>, when every source of it agrees on its bytes.
func (b *Binary) PlainPath() string { return path.Join(b.Platform, b.Name) }

// DigestPath is where these bytes are served under this release name.
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
	Platform, Release string
	SHA256s           []string // sorted
}

// Reason says in one line why the release has no plain path.
func (w Withheld) Reason() string {
	return fmt.Sprintf("%d different binaries claim this release name; each is served only at its own digest URL (sha256/<hex>/minio.%s)", len(w.SHA256s), w.Release)
}

// Snapshot is an immutable view of the store, swapped in whole on every
// change, so readers never see a half-updated index.
type Snapshot struct {
	all      []*Binary // every indexed file and view
	plain    []*Binary // the releases served by name
	withheld []Withheld
	files    map[string]File
	claims   map[string][]*Binary // PlainPath -> every binary claiming it
	tenant   map[string][]*Binary // <hex>/minio.<RELEASE> -> its views
}

// Binaries returns the releases served at their plain paths, sorted; not
// to be modified.
func (s *Snapshot) Binaries() []*Binary { return s.plain }

// All returns every indexed binary file and view.
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
// constant time with every candidate's, so the time taken says nothing
// about how much of a guess was right.
func (s *Snapshot) TenantFile(digest, component, name string) (File, bool) {
	kind, bin := KindBinary, name
	if b, ok := strings.CutSuffix(name, SHA256SumSuffix); ok {
		kind, bin = KindSHA256Sum, b
	} else if b, ok := strings.CutSuffix(name, MinisigSuffix); ok {
		kind, bin = KindMinisig, b
	}
	var found *Binary
	for _, b := range s.tenant[digest+"/"+bin] {
		if subtle.ConstantTimeCompare([]byte(b.component), []byte(component)) == 1 {
			found = b
		}
	}
	if found == nil || !ValidDigest(component) {
		return File{}, false
	}
	return File{Binary: found, Kind: kind}, true
}

// Binary returns the release's binary served at its plain path for
// platform ("" for the root), or nil (none, or claimed with other bytes).
func (s *Snapshot) Binary(platform, release string) *Binary {
	return s.binaryAt(path.Join(platform, "minio."+release))
}

// ByDigest returns the binary of SHA-256 digest stored under release, or nil.
func (s *Snapshot) ByDigest(digest, release string) *Binary {
	return s.binaryAt(DigestPath(digest, release))
}

func (s *Snapshot) binaryAt(rel string) *Binary {
	if f, ok := s.files[rel]; ok && f.Kind == KindBinary {
		return f.Binary
	}
	return nil
}

// Claims returns every binary stored under the release for platform,
// whatever its bytes, private ones included (never served by name).
func (s *Snapshot) Claims(platform, release string) []*Binary {
	return s.claims[path.Join(platform, "minio."+release)]
}

// stored returns the store's own binary of these bytes and name, or nil.
func (s *Snapshot) stored(platform, digest, name string) *Binary {
	want := path.Join(platform, digestDirName, digest, name)
	for _, b := range s.claims[path.Join(platform, name)] {
		if b.rel == want {
			return b
		}
	}
	return nil
}

// StoredBytes is the size of the distinct binaries (each digest and
// platform once).
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

// index builds a snapshot from every verified binary file: each is served
// at its digest path; a release is served at its plain path only when
// every public binary claiming it has the same bytes.
func index(all []*Binary) *Snapshot {
	// A file at the plain path (placed by hand) represents its release
	// before a digest directory's.
	slices.SortFunc(all, func(a, b *Binary) int {
		return cmp.Or(cmp.Compare(a.Platform, b.Platform), cmp.Compare(a.Name, b.Name), cmp.Compare(a.rel, b.rel))
	})
	next := &Snapshot{all: all, files: map[string]File{}, claims: map[string][]*Binary{}, tenant: map[string][]*Binary{}}
	add := func(key string, b *Binary) {
		next.files[key] = File{Binary: b, Kind: KindBinary}
		next.files[key+SHA256SumSuffix] = File{Binary: b, Kind: KindSHA256Sum}
		next.files[key+MinisigSuffix] = File{Binary: b, Kind: KindMinisig}
	}
	// A view is found only with its component; a private binary is a
	// claim the fetcher reuses but is served at no public path.
	var plainPaths []string
	public := map[string][]*Binary{}
	for _, b := range all {
		if b.component != "" {
			k := b.SHA256 + "/" + b.Name
			next.tenant[k] = append(next.tenant[k], b)
			continue
		}
		key := b.PlainPath()
		next.claims[key] = append(next.claims[key], b)
		if !b.private() {
			if public[key] == nil {
				plainPaths = append(plainPaths, key)
			}
			public[key] = append(public[key], b)
		}
	}
	// The store's own copy serves at its digest path first: a file placed
	// by hand with the same bytes serves only when no digest directory
	// has them.
	for _, own := range []bool{true, false} {
		for _, key := range plainPaths {
			for _, b := range public[key] {
				if _, taken := next.files[b.DigestPath()]; !taken && b.inDigestDir() == own {
					add(b.DigestPath(), b)
				}
			}
		}
	}
	for _, key := range plainPaths {
		claims := public[key]
		var digests []string
		for _, b := range claims {
			digests = append(digests, b.SHA256)
		}
		slices.Sort(digests)
		if digests = slices.Compact(digests); len(digests) > 1 {
			next.withheld = append(next.withheld, Withheld{Platform: claims[0].Platform, Release: claims[0].Release, SHA256s: digests})
			continue
		}
		next.plain = append(next.plain, claims[0])
		add(key, claims[0])
	}
	return next
}
