package binstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// TestAViewIsNeverPublishedOfABinaryNoLongerStored: the binary source
// resolves a tenant's image from one snapshot and publishes the tenant's
// view later; the collector, a runnable of its own, may remove the binary
// in between (the tenant switched spec.image back to a release whose grace
// just ended). The view is refused, so no URL that answers 404 is handed
// out in status.binary.url.
func TestAViewIsNeverPublishedOfABinaryNoLongerStored(t *testing.T) {
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
	assert.ErrorContains(t, err, "no longer stored")
	_, indexed := s.Current().TenantFile(b.SHA256, tenantA, b.Name)
	assert.False(t, indexed, "no view of a removed binary is indexed")
}
