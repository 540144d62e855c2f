package binsource

import (
	"bytes"
	"testing"
	"time"

	"aead.dev/minisign"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// TestHousekeepingKeepsEachTenantsOwnBytes: two binaries under one old
// release name; only the one an ObjectStore resolved to stays, and the
// hard-linked name of shared bytes survives removing another name.
func TestHousekeepingKeepsEachTenantsOwnBytes(t *testing.T) {
	store, landOn := housekeepStore(t)
	land := func(rel string, content []byte) string { return landOn("linux-amd64", rel, content, "x:"+rel) }
	old := "RELEASE.2025-01-01T00-00-00Z"
	mine := land(old, []byte("tenant B's bytes"))
	theirs := land(old, []byte("tenant A's bytes, since deleted"))
	shared := land("RELEASE.2025-02-01T00-00-00Z", []byte("tenant A's bytes, since deleted"))
	require.Equal(t, theirs, shared)
	c, _ := housekeepController(t, store, ControllerConfig{Keep: 1}, "b", "c")
	resolved(c, "b", old, mine)
	newest := "RELEASE.2025-02-01T00-00-00Z"
	resolved(c, "c", newest, shared)
	c.gc.collect()

	snap := store.Current()
	assert.NotNil(t, snap.ByDigest(mine, old), "the tenant's own bytes stay")
	assert.Nil(t, snap.ByDigest(theirs, old), "other bytes under its release name go")
	assert.NotNil(t, snap.ByDigest(shared, newest), "the newest release another ObjectStore wants stays, its hard link intact")
	assert.NotNil(t, snap.Binary("linux-amd64", old), "undisputed again, the release has its plain path back")
}

// TestUnreferencedBinariesGoOnlyAfterTheGrace: a binary no ObjectStore
// references stays for the grace (an image flip-flop does not re-pull),
// is kept if referenced again meanwhile, and goes once the grace passed.
func TestUnreferencedBinariesGoOnlyAfterTheGrace(t *testing.T) {
	store, landOn := housekeepStore(t)
	land := func(rel string, content []byte) string { return landOn("linux-amd64", rel, content, "x:"+rel) }
	oldRel, newRel := "RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z"
	old, cur := land(oldRel, []byte("old")), land(newRel, []byte("new"))
	clk := clocktesting.NewFakeClock(time.Now())
	c, _ := housekeepController(t, store, ControllerConfig{Keep: 0, Grace: 10 * time.Minute, Clock: clk}, "b")
	wants := func(rel, sha string) {
		resolved(c, "b", rel, sha)
		c.gc.collect()
	}

	wants(newRel, cur)
	assert.NotNil(t, store.Current().ByDigest(old, oldRel), "unreferenced, but within the grace")
	clk.Step(5 * time.Minute)
	wants(oldRel, old) // flip back: referenced again
	wants(newRel, cur) // and away: the grace starts over
	clk.Step(9 * time.Minute)
	c.gc.collect()
	assert.NotNil(t, store.Current().ByDigest(old, oldRel), "the grace started over when it was referenced again")
	clk.Step(2 * time.Minute) // the timer housekeeping set fires
	require.Eventually(t, func() bool { return store.Current().ByDigest(old, oldRel) == nil }, 5*time.Second, 10*time.Millisecond,
		"gone once unreferenced for the grace")
	assert.NotNil(t, store.Current().ByDigest(cur, newRel))
}

// housekeepStore is a store trusting a fresh key, and what lands a signed
// binary in it (returning its SHA-256).
func housekeepStore(t *testing.T) (*binstore.Store, func(platform, rel string, content []byte, image string) string) {
	t.Helper()
	key := binstoretest.NewKey(t)
	store, err := binstore.New(t.TempDir(), zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{key.Public}})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	store.Scan()
	return store, func(platform, rel string, content []byte, image string) string {
		st, err := store.Stage(platform, rel, bytes.NewReader(content), 1<<20)
		require.NoError(t, err)
		b, err := st.Commit(binstore.Candidate{Minisig: key.Sign(t, content), Source: binstore.Source{Image: image}})
		require.NoError(t, err)
		return b.SHA256
	}
}

// housekeepController is a testController over store whose ObjectStores
// t/<name> each run the image registry/minio:<name>.
func housekeepController(t *testing.T, store *binstore.Store, cfg ControllerConfig, names ...string) (*Controller, cache.Indexer) {
	t.Helper()
	f, err := NewFetcher(FetcherConfig{Store: store})
	require.NoError(t, err)
	cfg.Fetcher = f
	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range names {
		require.NoError(t, stores.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
			"metadata": map[string]any{"name": name, "namespace": "t"},
			"spec":     map[string]any{"image": "registry/minio:" + name},
		}}))
	}
	return testController(t, cfg, stores), stores
}

// resolved records what t/<name>'s image resolved to, as its sync would.
func resolved(c *Controller, name, release, sha string) {
	c.record("t/"+name, outcome{image: "registry/minio:" + name, release: release, binary: &v1.BinaryStatus{Release: release, SHA256: sha}})
}

// testController is a Controller with what its collector reads (no Loop);
// the collector runs until the test ends, as NewController's does beside
// the Loop.
func testController(t *testing.T, cfg ControllerConfig, stores cache.Indexer) *Controller {
	t.Helper()
	c := &Controller{cfg: cfg, log: zerolog.Nop(), stores: stores, outcomes: map[string]outcome{}}
	c.gc = newCollector(cfg.Fetcher.cfg.Store, cfg.Keep, cfg.Grace, cfg.Clock, c.log, c.wanted)
	go func() { _ = c.gc.Run(t.Context()) }()
	return c
}

// TestNewestReleasesStayOnlyWhileWanted (issue 29): OPERATOR_STORE_KEEP
// keeps rollback targets, releases older than one an ObjectStore wants.
// A newest release nothing wants (a name made up to sort last, one
// naming a time far ahead) goes after the grace like any other, and once
// no ObjectStore wants anything the store empties after the grace.
func TestNewestReleasesStayOnlyWhileWanted(t *testing.T) {
	store, landOn := housekeepStore(t)
	land := func(rel string) string { return landOn("linux-amd64", rel, []byte("bytes of "+rel), "x:"+rel) }
	previous, current, future := "RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z", "RELEASE.2099-01-01T00-00-00Z"
	prevSHA, curSHA, futureSHA := land(previous), land(current), land(future)
	clk := clocktesting.NewFakeClock(time.Now())
	c, stores := housekeepController(t, store, ControllerConfig{Keep: 3, Grace: 10 * time.Minute, Clock: clk}, "b")
	resolved(c, "b", current, curSHA)
	c.gc.collect()
	assert.NotNil(t, store.Current().ByDigest(futureSHA, future), "unreferenced, but within the grace")

	clk.Step(11 * time.Minute)
	require.Eventually(t, func() bool { return store.Current().ByDigest(futureSHA, future) == nil }, 5*time.Second, 10*time.Millisecond,
		"the newest release nothing wants goes after the grace, though fewer than OPERATOR_STORE_KEEP releases are newer")
	assert.NotNil(t, store.Current().ByDigest(prevSHA, previous), "the previous release stays for a rollback")
	assert.NotNil(t, store.Current().ByDigest(curSHA, current), "the wanted release stays")

	// The ObjectStore is deleted: nothing is a rollback target any more.
	os, _, err := stores.GetByKey("t/b")
	require.NoError(t, err)
	require.NoError(t, stores.Delete(os))
	c.forget("t/b")
	c.gc.collect()
	assert.Len(t, store.Current().All(), 2, "within the grace")
	clk.Step(11 * time.Minute)
	require.Eventually(t, func() bool { return len(store.Current().All()) == 0 }, 5*time.Second, 10*time.Millisecond,
		"releases nothing wants go after the grace, the newest too")
}

// Release names are the tenant's to choose: names that are no release
// time (zzz-1) or a time to come sort after every real release, and
// counted as newer they pushed other tenants' rollback targets out
// (hostile review). Only real, past release times count as newer.
func TestMadeUpReleaseNamesEvictNoRollbackTarget(t *testing.T) {
	store, landOn := housekeepStore(t)
	land := func(rel string) string { return landOn("linux-amd64", rel, []byte("bytes of "+rel), "x:"+rel) }
	previous, current := "RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-02-01T00-00-00Z"
	prevSHA, curSHA := land(previous), land(current)
	land("zzz-1")
	land("release.9")
	land("RELEASE.2099-01-01T00-00-00Z")
	clk := clocktesting.NewFakeClock(time.Now())
	c, _ := housekeepController(t, store, ControllerConfig{Keep: 3, Grace: 10 * time.Minute, Clock: clk}, "b")
	resolved(c, "b", current, curSHA)
	c.gc.collect()
	clk.Step(11 * time.Minute)
	require.Eventually(t, func() bool { return len(store.Current().All()) == 2 }, 5*time.Second, 10*time.Millisecond,
		"the made-up names nothing wants go after the grace")
	assert.NotNil(t, store.Current().ByDigest(prevSHA, previous), "the previous release stays for a rollback: one real release is newer, not four")
	assert.NotNil(t, store.Current().ByDigest(curSHA, current))
}
