package binsource

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// TestNewerLabelsEvictNoOtherPlatformBinaryOfAReferencedImage:
// housekeeping keeps a digest-directory binary only when it is the one in
// some ObjectStore's status.binary (sha256/release pairs), and
// status.binary names one platform (linux/amd64 when the image has it).
// Every other platform's binary of a referenced image is "unreferenced",
// so it is removed as soon as OPERATOR_STORE_KEEP newer releases exist on
// that platform. Any tenant supplies those: images labelled with newer
// release names (RELEASE.2099-...). Tenant B's multi-platform image then
// loses its linux/arm64 binary (its digest path answers 404, the listing
// drops it) although B still runs that image, and every resync pulls it
// again.
//
// Now sync records every platform's binary of the image (outcome.pairs)
// and housekeeping keeps them all.
func TestNewerLabelsEvictNoOtherPlatformBinaryOfAReferencedImage(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	store, land := housekeepStore(t)
	rel := "RELEASE.2025-01-01T00-00-00Z"
	amd := land("linux-amd64", rel, []byte("B's amd64 build"), "registry/minio:b")
	arm := land("linux-arm64", rel, []byte("B's arm64 build"), "registry/minio:b")
	// The attacker's image, labelled with a newer release, for arm64.
	newer := "RELEASE.2099-01-01T00-00-00Z"
	attacker := land("linux-arm64", newer, []byte("A's bytes under a far-future name"), "evil/minio:a")

	f, err := NewFetcher(FetcherConfig{Store: store})
	require.NoError(t, err)
	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range []struct{ ns, name, image string }{{"tb", "b", "registry/minio:b"}, {"ta", "a", "evil/minio:a"}} {
		require.NoError(t, stores.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
			"metadata": map[string]any{"name": o.name, "namespace": o.ns},
			"spec":     map[string]any{"image": o.image},
		}}))
	}
	c := testController(t, ControllerConfig{Fetcher: f, Keep: 1}, stores)
	// What sync records for each: status.binary names the amd64 build of
	// B's image (the image has both), the arm64 one of A's.
	c.record("tb/b", outcome{image: "registry/minio:b", release: rel, binary: &v1.BinaryStatus{Release: rel, SHA256: amd, Platform: "linux-amd64"},
		pairs: []string{amd + "/" + rel, arm + "/" + rel}})
	c.record("ta/a", outcome{image: "evil/minio:a", release: newer, binary: &v1.BinaryStatus{Release: newer, SHA256: attacker, Platform: "linux-arm64"}})
	c.gc.collect()

	snap := store.Current()
	assert.NotNil(t, snap.ByDigest(amd, rel), "B's amd64 binary stays")
	assert.NotNil(t, snap.ByDigest(arm, rel), "B's arm64 binary, of the image B still runs, was removed because another tenant landed a newer release name on arm64")
}

// TestOneUnresolvedObjectStoreStopsNoHousekeepingAfterTheColdStart:
// housekeeping returns without removing anything while any ObjectStore
// has no outcome yet (its first pull has not ended). A tenant keeps one
// unresolved for as long as it likes: many ObjectStores on a registry
// that hangs wait in its namespace's single pull slot, 10 minutes each
// (OPERATOR_PULL_TIMEOUT), or it recreates one every few minutes.
// Meanwhile no binary is removed for any tenant, so the store only grows
// (the emptyDir limit evicts every replica).
//
// Now only a cold start (before every ObjectStore had an outcome once)
// holds housekeeping; after it, an unresolved ObjectStore holds nobody's.
// What it may need again is re-pulled; the unreferenced grace keeps a
// flip-flop from costing that.
func TestOneUnresolvedObjectStoreStopsNoHousekeepingAfterTheColdStart(t *testing.T) {
	// Its own store, no memory measured: it runs beside the others, its
	// landings' syncs to disk overlapping theirs.
	t.Parallel()
	store, landOn := housekeepStore(t)
	land := func(rel string, content []byte) string { return landOn("linux-amd64", rel, content, "x:"+rel) }
	oldRel, current := "RELEASE.2025-01-01T00-00-00Z", "RELEASE.2025-06-01T00-00-00Z"
	old := land(oldRel, []byte("a binary nobody references any more"))
	land("RELEASE.2025-03-01T00-00-00Z", []byte("another"))
	cur := land(current, []byte("what tenant B runs"))

	f, err := NewFetcher(FetcherConfig{Store: store})
	require.NoError(t, err)
	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range []struct{ ns, name, image string }{{"tb", "b", "registry/minio:b"}, {"ta", "stuck", "hangs.example/minio:x"}} {
		require.NoError(t, stores.Add(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
			"metadata": map[string]any{"name": o.name, "namespace": o.ns},
			"spec":     map[string]any{"image": o.image},
		}}))
	}
	c := testController(t, ControllerConfig{Fetcher: f, Keep: 1}, stores)
	c.record("tb/b", outcome{image: "registry/minio:b", release: current, binary: &v1.BinaryStatus{Release: current, SHA256: cur}})
	// Past the cold start: every ObjectStore had an outcome once.
	c.settled = true
	// ta/stuck has no outcome: its pull is still waiting or running.
	c.gc.collect()

	snap := store.Current()
	assert.NotNil(t, snap.ByDigest(cur, current))
	assert.True(t, snap.ByDigest(old, oldRel) == nil, "an old, unreferenced binary (two newer releases, keep 1) stays because another namespace's ObjectStore is unresolved")
}
