package upgradeserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/object-store-operator/operator/binstore"
)

// Listing is the JSON answer of GET /webhook/v1/update.
type Listing struct {
	Binaries []ListedBinary `json:"binaries"`
	// Withheld are releases claimed with different bytes: they have no
	// plain path, and each binary is served only at its own digest URL
	// (the one in its ObjectStore's status.binary.url).
	Withheld []WithheldRelease `json:"withheld,omitempty"`
}

// WithheldRelease is a release left out of the plain paths, with why.
type WithheldRelease struct {
	Name    string `json:"name"`
	Release string `json:"release"`
	OS      string `json:"os,omitempty"`
	Arch    string `json:"arch,omitempty"`
	// Reason says why in one line.
	Reason string `json:"reason"`
}

// ListedBinary describes one downloadable binary with absolute URLs built
// from the request's scheme and Host, so a curl from a pod can follow them.
type ListedBinary struct {
	Name    string `json:"name"`
	Release string `json:"release"`
	OS      string `json:"os,omitempty"`
	Arch    string `json:"arch,omitempty"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	// Signed is always true: the store lists only binaries whose
	// .minisig verified. Kept for clients of earlier versions.
	Signed bool `json:"signed"`
	// KeyID is the minisign key that verified the signature.
	KeyID string `json:"keyId"`
	// Source names the image (with digests) or mirror the binary came
	// from; empty for binaries placed in the store directory by hand.
	Source       string    `json:"source,omitempty"`
	ModTime      time.Time `json:"modTime"`
	URL          string    `json:"url"`
	SHA256SumURL string    `json:"sha256sumUrl"`
	MinisigURL   string    `json:"minisigUrl"`
}

// maxCachedListings bounds the per-base-URL cache: the Host header is
// chosen by clients, so an unbounded cache would be theirs to grow.
const maxCachedListings = 32

// listingCache holds rendered listings per base URL for one snapshot, so
// the hot path of GET /webhook/v1/update is a map lookup and one write.
// The map is copied on write: a request only loads a pointer, so requests
// on every core read it without writing to memory they share (a read lock
// would count readers in one word all of them write).
type listingCache struct {
	snap    *binstore.Snapshot
	mu      sync.Mutex // serializes writers
	entries atomic.Pointer[map[baseKey]*renderedListing]
}

// baseKey names a base URL by its parts, so a lookup builds no string.
type baseKey struct {
	https bool
	host  string
}

func (k baseKey) url() string {
	scheme := "http"
	if k.https {
		scheme = "https"
	}
	return scheme + "://" + k.host + UpdatePath
}

type renderedListing struct {
	body   []byte
	etag   []string
	length []string
}

func (c *listingCache) listing(base baseKey) (*renderedListing, error) {
	if m := c.entries.Load(); m != nil {
		if r, ok := (*m)[base]; ok {
			return r, nil
		}
	}
	r, err := renderListing(c.snap.Binaries(), c.snap.Withheld(), base.url())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.entries.Load()
	if old != nil && len(*old) >= maxCachedListings {
		return r, nil
	}
	m := make(map[baseKey]*renderedListing, 1+lenOf(old))
	if old != nil {
		maps.Copy(m, *old)
	}
	m[base] = r
	c.entries.Store(&m)
	return r, nil
}

func lenOf(m *map[baseKey]*renderedListing) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

func renderListing(binaries []*binstore.Binary, withheld []binstore.Withheld, base string) (*renderedListing, error) {
	l := Listing{Binaries: make([]ListedBinary, 0, len(binaries))}
	for _, w := range withheld {
		osName, arch, _ := strings.Cut(w.Platform, "-")
		l.Withheld = append(l.Withheld, WithheldRelease{Name: "minio." + w.Release, Release: w.Release, OS: osName, Arch: arch, Reason: w.Reason()})
	}
	for _, b := range binaries {
		u := base + "/" + b.PlainPath()
		lb := ListedBinary{
			Name: b.Name, Release: b.Release, OS: b.OS, Arch: b.Arch,
			Size: b.Size, SHA256: b.SHA256, Signed: true, KeyID: b.KeyID, ModTime: b.ModTime.UTC(),
			URL: u, SHA256SumURL: u + binstore.SHA256SumSuffix, MinisigURL: u + binstore.MinisigSuffix,
		}
		if b.Source != nil {
			lb.Source = b.Source.String()
		}
		l.Binaries = append(l.Binaries, lb)
	}
	body, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render listing: %w", err)
	}
	body = append(body, '\n')
	return &renderedListing{
		body:   body,
		etag:   []string{`"` + contentETag(body) + `"`},
		length: []string{strconv.Itoa(len(body))},
	}, nil
}

func contentETag(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
