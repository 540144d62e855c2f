package binstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"aead.dev/minisign"

	"github.com/object-store-operator/operator/internal/reason"
)

// The reasons the store refuses a binary for: the Reason of the
// *reason.Error it returns. Callers give each its severity and remedy in
// their own words (binsource.Reasons). A failure of none of them (the
// file system's, say) carries no reason.
const (
	// ReasonChecksumMismatch: the bytes do not match the .sha256sum (or the
	// source's own checksum).
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonUnsigned: there is no .minisig and nothing may sign it.
	ReasonUnsigned = "Unsigned"
	// ReasonSignatureInvalid: the .minisig is malformed, names a key that
	// is not trusted, or does not verify.
	ReasonSignatureInvalid = "SignatureInvalid"
	// ReasonTooLarge: the binary exceeds the size bound.
	ReasonTooLarge = "BinaryTooLarge"
)

// Source is where a binary came from. It is recorded per binary and
// release name; other bytes under the same release name are another binary
// with a source of its own, never a replacement.
type Source struct {
	// Image is the reference as the ObjectStore named it.
	Image string `json:"image,omitempty"`
	// Registry and Repository locate the image.
	Registry   string `json:"registry,omitempty"`
	Repository string `json:"repository,omitempty"`
	// ManifestDigest is the digest of the platform image's manifest.
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// LayerDigest is the digest of the layer the binary was read from,
	// verified over the whole blob.
	LayerDigest string `json:"layerDigest,omitempty"`
	// MirrorURL is the release mirror's URL of the binary.
	MirrorURL string `json:"mirrorUrl,omitempty"`
	// SignedBy is the key id of the platform key that signed a binary the
	// source did not sign; empty when the source's own signature is served.
	SignedBy string `json:"signedBy,omitempty"`
	// Private is true when the image was pulled with the ObjectStore's
	// credentials: the binary is then served only at the URLs of the
	// ObjectStores it was published for, never publicly.
	Private bool `json:"private,omitempty"`
	// ObjectStore is the namespace/name a tenant's copy was published for.
	ObjectStore string `json:"objectStore,omitempty"`
}

// String names the source for messages: the image with its digests, or
// the mirror URL.
func (s Source) String() string {
	if s.MirrorURL != "" {
		return "mirror " + s.MirrorURL
	}
	return fmt.Sprintf("image %s (manifest %s, layer %s)", s.Image, s.ManifestDigest, s.LayerDigest)
}

// FormatKeyID prints a minisign key id the way minisign does.
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

// verify checks sig against the data whose BLAKE2b prehash r has read, with
// the trusted key the signature names. It returns that key's id.
func (s *Store) verify(r *minisign.Reader, sig []byte) (string, error) {
	var parsed minisign.Signature
	if err := parsed.UnmarshalText(sig); err != nil {
		return "", reason.Errorf(ReasonSignatureInvalid, "malformed .minisig: %w", err)
	}
	keyID := FormatKeyID(parsed.KeyID)
	if parsed.Algorithm != minisign.HashEdDSA {
		// Verifying a legacy signature needs the whole binary in memory.
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
