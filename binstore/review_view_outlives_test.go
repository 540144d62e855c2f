package binstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// TestAViewPublishedAfterItsBinaryWasRemovedOutlivesIt: the binary source
// resolves a tenant's image from one snapshot (Fetcher.servedFor) and
// publishes the tenant's view later; the collector, a runnable of its own,
// may remove the binary in between (the tenant switched spec.image back to
// a release whose grace just ended). Publish takes b from the caller
// without checking it is still indexed, so it indexes a view of a file
// that is gone: the tenant is told (status.binary.url) of a URL that 404s,
// and MinIO's update fails on it (a 404 is not our refusal: counted
// against the release).
func TestAViewPublishedAfterItsBinaryWasRemovedOutlivesIt(t *testing.T) {
	key := binstoretest.NewKey(t)
	s := newStore(t, t.TempDir(), trusting(key))
	content := randomContent(t, 1<<16)
	rel := "RELEASE.2025-04-08T15-41-24Z"
	src := imageA
	src.Private = true
	b, err := commitAs(t, s, rel, content, key, src)
	require.NoError(t, err)

	// The collector removes it (unreferenced past its grace)...
	require.NoError(t, s.RemoveBinary(b))
	// ...while the tenant's sync, holding b from an older snapshot,
	// publishes its view.
	_, err = s.Publish(b, tenantA, *b.Source, false)
	_, indexed := s.Current().TenantFile(b.SHA256, tenantA, b.Name)
	assert.False(t, err == nil && indexed,
		"a view of a removed binary was published and indexed: its URL is handed out and 404s")
}
