// Package binstoretest makes signed MinIO releases for tests, the way
// MinIO publishes them: minio.<RELEASE>, its .sha256sum and a prehashed
// minisign .minisig.
package binstoretest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"

	"aead.dev/minisign"
	"github.com/stretchr/testify/require"
)

// Key is a minisign key pair.
type Key struct {
	Public  minisign.PublicKey
	Private minisign.PrivateKey
}

// NewKey makes a fresh key pair.
func NewKey(t testing.TB) Key {
	t.Helper()
	pub, priv, err := minisign.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return Key{Public: pub, Private: priv}
}

// PackageKey makes a key pair for a package's tests to share, where no
// testing.TB exists yet (a package-level var); it panics only if the
// system's random source fails.
func PackageKey() Key {
	pub, priv, err := minisign.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return Key{Public: pub, Private: priv}
}

// PublicString is the one-line form MINIO_UPDATE_MINISIGN_PUBKEY takes.
func (k Key) PublicString() string { return k.Public.String() }

// PrivateText is the unencrypted secret-key file minisign reads.
func (k Key) PrivateText(t testing.TB) []byte {
	t.Helper()
	b, err := k.Private.MarshalText()
	require.NoError(t, err)
	return b
}

// Sign returns a prehashed signature of content, as `minisign -S` makes.
func (k Key) Sign(t testing.TB, content []byte) []byte {
	t.Helper()
	r := minisign.NewReader(bytes.NewReader(content))
	_, err := io.Copy(io.Discard, r)
	require.NoError(t, err)
	return r.SignWithComments(k.Private, "timestamp:0\tfile:test", "signature from a test key")
}

// Verify checks sig over content the way MinIO's update client does.
func (k Key) Verify(content, sig []byte) bool { return minisign.Verify(k.Public, content, sig) }

// WriteRelease lays out minio.<release>, its .sha256sum and its .minisig
// (signed with key) under dir/platform and returns the SHA-256.
func WriteRelease(t testing.TB, dir, platform, release string, content []byte, key Key) string {
	t.Helper()
	d := filepath.Join(dir, platform)
	require.NoError(t, os.MkdirAll(d, 0o755))
	name := "minio." + release
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	require.NoError(t, os.WriteFile(filepath.Join(d, name), content, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, name+".minisig"), key.Sign(t, content), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, name+".sha256sum"), []byte(digest+"  "+name+"\n"), 0o644))
	return digest
}

// SHA256 is the lower-case hex digest of content.
func SHA256(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}
