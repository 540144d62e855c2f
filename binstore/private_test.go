package binstore

import (
	"strings"
	"testing"

	"aead.dev/minisign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

const (
	tenantA = "abcdef1111111111111111111111111111111111111111111111111111111111"
	tenantB = "2222222222222222222222222222222222222222222222222222222222222222"
)

// privateBinary is a store in dir trusting key, holding size random bytes
// under rel from imageA pulled with a tenant's credentials.
func privateBinary(t *testing.T, dir string, size int) (s *Store, key binstoretest.Key, b *Binary, content []byte, rel string) {
	t.Helper()
	key = binstoretest.NewKey(t)
	s = newStore(t, dir, trusting(key))
	content, rel = randomContent(t, size), "RELEASE.2025-04-08T15-41-24Z"
	src := imageA
	src.Private = true
	b, err := commitAs(t, s, rel, content, key, src)
	require.NoError(t, err)
	return s, key, b, content, rel
}

// A binary pulled with a tenant's credentials is served only below its
// tenant's component, never at its digest path, its plain path or in the
// listing; a wrong or missing component finds nothing.
func TestPrivateBinaryIsServedOnlyBelowItsTenantsComponent(t *testing.T) {
	dir := t.TempDir()
	s, key, b, content, rel := privateBinary(t, dir, 1<<20)
	digest := binstoretest.SHA256(content)

	snap := s.Current()
	assert.Nil(t, snap.ByDigest(digest, rel), "no digest path")
	assert.Nil(t, snap.Binary("linux-amd64", rel), "no plain path")
	assert.Empty(t, snap.Binaries(), "not in the listing")
	_, ok := snap.Lookup(DigestPath(digest, rel))
	assert.False(t, ok)

	pub, err := s.Publish(b, tenantA, *b.Source, false)
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
	assert.Equal(t, int64(len(content)), snap.StoredBytes(), "the tenant's URL is a view: no second copy")

	// Restarted, the store finds the binary again, still private; the
	// tenant's URL is a view its ObjectStore's next sync publishes again.
	again := newStore(t, dir, trusting(key))
	stored := again.Current().Claims("linux-amd64", rel)
	require.Len(t, stored, 1)
	assert.True(t, stored[0].Private())
	_, err = again.Publish(stored[0], tenantA, *stored[0].Source, false)
	require.NoError(t, err)
	_, ok = again.Current().TenantFile(digest, tenantA, "minio."+rel+SHA256SumSuffix)
	assert.True(t, ok)
	assert.Nil(t, again.Current().ByDigest(digest, rel))
	assert.Empty(t, again.Current().Binaries())
}

// The same bytes from a public source make them public: an anonymous pull
// proved anyone can read them.
func TestPublicSourceOfPrivateBytesMakesThemPublic(t *testing.T) {
	s, key, _, content, rel := privateBinary(t, t.TempDir(), 1<<16)
	require.Nil(t, s.Current().ByDigest(binstoretest.SHA256(content), rel))
	_, err := commitAs(t, s, rel, content, key, imageB)
	require.NoError(t, err)
	assert.NotNil(t, s.Current().ByDigest(binstoretest.SHA256(content), rel))
	assert.NotNil(t, s.Current().Binary("linux-amd64", rel))
}

// The platform key signs each tenant's copy for that tenant: the trusted
// comment names its ObjectStore, and one tenant's signature is never at
// another's URL.
func TestPlatformKeySignsEachTenantsCopyForIt(t *testing.T) {
	platform, official := binstoretest.NewKey(t), binstoretest.NewKey(t)
	s := newStore(t, t.TempDir(), Options{TrustedKeys: []minisign.PublicKey{official.Public}, Signer: &platform.Private})
	content := []byte("hardened image binary")
	digest := binstoretest.SHA256(content)
	b, err := stage(t, s, content).Commit(Candidate{WantSHA256: digest, Source: imageA, Signable: true})
	require.NoError(t, err)
	require.True(t, b.PlatformSigned())

	srcA, srcB := *b.Source, *b.Source
	srcA.ObjectStore, srcB.ObjectStore = "team-a/store", "team-b/store"
	a, err := s.Publish(b, tenantA, srcA, true)
	require.NoError(t, err)
	bb, err := s.Publish(b, tenantB, srcB, true)
	require.NoError(t, err)
	snap := s.Current()
	sigs := map[string][]byte{}
	for comp, who := range map[string]string{tenantA: "team-a/store", tenantB: "team-b/store"} {
		f, ok := snap.TenantFile(digest, comp, "minio."+release+MinisigSuffix)
		require.True(t, ok)
		sig := f.Binary.Minisig()
		assert.True(t, platform.Verify(content, sig), "MinIO verifies it with the platform key")
		var parsed minisign.Signature
		require.NoError(t, parsed.UnmarshalText(sig))
		assert.Contains(t, parsed.TrustedComment, "objectstore:"+who, "the trusted comment names the ObjectStore")
		assert.Contains(t, parsed.TrustedComment, imageA.LayerDigest)
		sigs[who] = sig
	}
	assert.NotEqual(t, sigs["team-a/store"], sigs["team-b/store"], "A's signature is not at B's URL")
	assert.NotEqual(t, a.Minisig(), bb.Minisig())

	// Publishing again keeps the tenant's signature (no re-signing per sync).
	again, err := s.Publish(b, tenantA, srcA, true)
	require.NoError(t, err)
	assert.Equal(t, sigs["team-a/store"], again.Minisig())

	// The same bytes from an image that ships its own signature: that
	// signature replaces the platform's at the digest path.
	signed, err := stage(t, s, content).Commit(Candidate{WantSHA256: digest, Minisig: official.Sign(t, content), Source: imageB})
	require.NoError(t, err)
	assert.False(t, signed.PlatformSigned())
	assert.True(t, official.Verify(content, s.Current().ByDigest(digest, release).Minisig()), "the image's own .minisig")
}

// TestTheFirstLanderStaysOnRecord: the unit whose pull landed a binary is
// recorded with it and read back after a restart; a later source of the
// same bytes, even one that lands public provenance over a private
// binary, lands nothing new and does not take the charge over.
func TestTheFirstLanderStaysOnRecord(t *testing.T) {
	key := binstoretest.NewKey(t)
	dir := t.TempDir()
	s := newStore(t, dir, trusting(key))
	content := []byte("landed by team-a")
	private := imageA
	private.Private, private.LandedFor = true, "team-a"
	b, err := stage(t, s, content).Commit(Candidate{Minisig: key.Sign(t, content), Source: private})
	require.NoError(t, err)
	assert.Equal(t, "team-a", b.Source.LandedFor)

	public := imageB
	public.LandedFor = "tenant:b"
	again, err := stage(t, s, content).Commit(Candidate{Minisig: key.Sign(t, content), Source: public})
	require.NoError(t, err)
	assert.False(t, again.Private(), "the public provenance landed over the private one")
	assert.Equal(t, "team-a", again.Source.LandedFor, "the first lander stays charged")

	restarted := newStore(t, dir, trusting(key))
	stored := restarted.Current().ByDigest(b.SHA256, release)
	require.NotNil(t, stored)
	require.NotNil(t, stored.Source)
	assert.Equal(t, "team-a", stored.Source.LandedFor, "a restart reads who landed it")
}
