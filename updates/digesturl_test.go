package updates

import (
	"bytes"
	"testing"

	"aead.dev/minisign"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// TestUpdateURLNamesTheTenantsOwnBytes: two images claim one release with
// different bytes; each tenant is given the digest URL of its own binary,
// and the plain path, withheld, is given to no one.
func TestUpdateURLNamesTheTenantsOwnBytes(t *testing.T) {
	key := binstoretest.NewKey(t)
	s, err := binstore.New(t.TempDir(), zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Scan()
	land := func(content []byte) string {
		st, err := s.Stage("linux-amd64", relNew, bytes.NewReader(content), 1<<20)
		require.NoError(t, err)
		b, err := st.Commit(binstore.Candidate{Minisig: key.Sign(t, content), Source: binstore.Source{Image: "x"}})
		require.NoError(t, err)
		return b.SHA256
	}
	a, b := land([]byte("tenant A")), land([]byte("tenant B"))
	c := &Controller{cfg: Config{Store: s, UpdateURL: "https://op.ops.svc:4221/webhook/v1/update/"}}
	for _, sha := range []string{a, b} {
		u, err := c.updateURL(relNew, sha, "", "linux/amd64")
		require.NoError(t, err)
		assert.Equal(t, "https://op.ops.svc:4221/webhook/v1/update/sha256/"+sha+"/minio."+relNew+".sha256sum", u)
	}
	_, err = c.updateURL(relNew, "", "", "linux/amd64")
	assert.Error(t, err, "the release's plain path is withheld while its claims disagree")
	_, err = c.updateURL(relOld, a, "", "linux/amd64")
	assert.Error(t, err, "a digest under a release it was not stored under")

	// An undisputed release's plain path is the tenant's platform's.
	st, err := s.Stage("linux-arm64", relNewer, bytes.NewReader([]byte("arm")), 1<<20)
	require.NoError(t, err)
	_, err = st.Commit(binstore.Candidate{Minisig: key.Sign(t, []byte("arm")), Source: binstore.Source{Image: "y"}})
	require.NoError(t, err)
	u, err := c.updateURL(relNewer, "", "", "linux/arm64")
	require.NoError(t, err)
	assert.Equal(t, "https://op.ops.svc:4221/webhook/v1/update/linux-arm64/minio."+relNewer+".sha256sum", u)
	_, err = c.updateURL(relNewer, "", "", "linux/amd64")
	assert.ErrorContains(t, err, "for linux/amd64", "never another platform's binary")
}
