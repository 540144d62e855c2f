package binstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAViewIsNeverPublishedOfABinaryNoLongerStored: the binary source
// resolves a tenant's image from one snapshot and publishes the tenant's
// view later; the collector, a runnable of its own, may remove the binary
// in between (the tenant switched spec.image back to a release whose grace
// just ended). The view is refused, so no URL that answers 404 is handed
// out in status.binary.url.
func TestAViewIsNeverPublishedOfABinaryNoLongerStored(t *testing.T) {
	s, _, b, _, _ := privateBinary(t, t.TempDir(), 1<<16)

	// The collector removes it (unreferenced past its grace)...
	require.NoError(t, s.RemoveBinary(b))
	// ...while the tenant's sync, holding b from an older snapshot,
	// publishes its view.
	_, err := s.Publish(b, tenantA, *b.Source, false)
	assert.ErrorContains(t, err, "no longer stored")
	_, indexed := s.Current().TenantFile(b.SHA256, tenantA, b.Name)
	assert.False(t, indexed, "no view of a removed binary is indexed")
}
