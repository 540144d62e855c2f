package binstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

const (
	tenantA = "abcdef1111111111111111111111111111111111111111111111111111111111"
	tenantB = "2222222222222222222222222222222222222222222222222222222222222222"
)

// A binary pulled with a tenant's credentials is served only below its
// tenant's component, never at its digest path, its plain path or in the
// listing; a wrong or missing component finds nothing.
func TestPrivateBinaryIsServedOnlyBelowItsTenantsComponent(t *testing.T) {
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, trusting(key))
	content := randomContent(t, 1<<20)
	rel := "RELEASE.2025-04-08T15-41-24Z"
	src := imageA
	src.Private = true
	b, err := commitAs(t, s, rel, content, key, src)
	require.NoError(t, err)
	digest := binstoretest.SHA256(content)

	snap := s.Current()
	assert.Nil(t, snap.ByDigest(digest, rel), "no digest path")
	assert.Nil(t, snap.Binary("linux-amd64", rel), "no plain path")
	assert.Empty(t, snap.Binaries(), "not in the listing")
	_, ok := snap.Lookup(DigestPath(digest, rel))
	assert.False(t, ok)

	pub, err := s.Publish(b, tenantA, b.Minisig(), *b.Source)
	require.NoError(t, err)
	assert.Equal(t, "sha256/"+digest+"/"+tenantA+"/minio."+rel, pub.URLPath())
	snap = s.Current()
	for _, kind := range []string{"", SHA256SumSuffix, MinisigSuffix} {
		f, ok := snap.TenantFile(digest, tenantA, "minio."+rel+kind)
		require.True(t, ok, kind)
		assert.Equal(t, digest, f.Binary.SHA256)
		_, ok = snap.TenantFile(digest, tenantB, "minio."+rel+kind)
		assert.False(t, ok, "another component: %s", kind)
		_, ok = snap.TenantFile(digest, strings.ToUpper(tenantA), "minio."+rel+kind)
		assert.False(t, ok, "upper case: %s", kind)
		_, ok = snap.TenantFile(digest, "", "minio."+rel+kind)
		assert.False(t, ok, "no component: %s", kind)
	}
	assert.Nil(t, snap.ByDigest(digest, rel), "publishing adds no digest path")
	assert.Empty(t, snap.Binaries())
	assert.Equal(t, int64(len(content)), snap.StoredBytes(), "the tenant's name is a hard link")

	// Restarted, the store finds the tenant's file again, still private.
	again := newStore(t, dir, trusting(key))
	_, ok = again.Current().TenantFile(digest, tenantA, "minio."+rel+SHA256SumSuffix)
	assert.True(t, ok)
	assert.Nil(t, again.Current().ByDigest(digest, rel))
	assert.Empty(t, again.Current().Binaries())
}

// The same bytes from a public source make them public: an anonymous pull
// proved anyone can read them.
func TestPublicSourceOfPrivateBytesMakesThemPublic(t *testing.T) {
	key := binstoretest.NewKey(t)
	s := newStore(t, t.TempDir(), trusting(key))
	content := randomContent(t, 1<<16)
	rel := "RELEASE.2025-04-08T15-41-24Z"
	src := imageA
	src.Private = true
	_, err := commitAs(t, s, rel, content, key, src)
	require.NoError(t, err)
	require.Nil(t, s.Current().ByDigest(binstoretest.SHA256(content), rel))
	_, err = commitAs(t, s, rel, content, key, imageB)
	require.NoError(t, err)
	assert.NotNil(t, s.Current().ByDigest(binstoretest.SHA256(content), rel))
	assert.NotNil(t, s.Current().Binary("linux-amd64", rel))
}
