package upgradeserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

// ListedBinary describes one downloadable binary with URLs under the
// server's configured base (as pods reach it), so a curl from a pod can
// follow them; never from the request's Host, which the client chooses.
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

type renderedListing struct {
	// snap is the snapshot it was rendered from.
	snap   *binstore.Snapshot
	body   []byte
	etag   []string
	length []string
}

// renderListing renders snap's listing with URLs under base (up to
// UpdatePath; empty: paths from the root).
func renderListing(snap *binstore.Snapshot, base string) (*renderedListing, error) {
	if base == "" {
		base = UpdatePath
	}
	base = strings.TrimSuffix(base, "/")
	binaries, withheld := snap.Binaries(), snap.Withheld()
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
		snap:   snap,
		body:   body,
		etag:   []string{`"` + contentETag(body) + `"`},
		length: []string{strconv.Itoa(len(body))},
	}, nil
}

func contentETag(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
