package upgradeserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
)

// A privately pulled binary is answered only at its tenant's URL; the
// listing, its plain paths, its digest path and any other component get
// nothing.
func TestPrivateBinaryIsServedOnlyAtItsTenantsURL(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	content := []byte("a licensed build pulled with a tenant's Secret")
	st, err := s.Stage("linux-amd64", release, bytes.NewReader(content), 1<<20)
	require.NoError(t, err)
	b, err := st.Commit(binstore.Candidate{Minisig: testKey.Sign(t, content), Source: binstore.Source{Image: "reg/private:" + release, Private: true}})
	require.NoError(t, err)
	component := strings.Repeat("ab", 32)
	pub, err := s.Publish(b, component, *b.Source, false)
	require.NoError(t, err)
	h := newTestHandler(t, s)

	own := UpdatePath + "/" + pub.URLPath()
	sum := do(t, h, http.MethodGet, own+".sha256sum", nil)
	require.Equal(t, http.StatusOK, sum.Code)
	assert.Equal(t, b.SHA256+"  minio."+release+"\n", sum.Body.String())
	bin := do(t, h, http.MethodGet, own, nil)
	require.Equal(t, http.StatusOK, bin.Code)
	assert.Equal(t, content, bin.Body.Bytes())
	sig := do(t, h, http.MethodGet, own+".minisig", nil)
	require.Equal(t, http.StatusOK, sig.Code)
	assert.True(t, testKey.Verify(content, sig.Body.Bytes()))

	for name, target := range map[string]string{
		"the plain path":            "/minio." + release,
		"the platform's plain path": "/linux-amd64/minio." + release,
		"the digest path":           "/sha256/" + b.SHA256 + "/minio." + release,
		"the digest path's sum":     "/sha256/" + b.SHA256 + "/minio." + release + ".sha256sum",
		"another component":         "/sha256/" + b.SHA256 + "/" + strings.Repeat("cd", 32) + "/minio." + release,
		"a component one off":       "/sha256/" + b.SHA256 + "/" + component[:63] + "0/minio." + release + ".sha256sum",
	} {
		assert.Equal(t, http.StatusNotFound, do(t, h, http.MethodGet, UpdatePath+target, nil).Code, name)
	}
	for name, target := range map[string]string{
		"upper-case component": "/sha256/" + b.SHA256 + "/" + strings.ToUpper(component) + "/minio." + release,
		"short component":      "/sha256/" + b.SHA256 + "/" + component[:10] + "/minio." + release,
	} {
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, do(t, h, http.MethodGet, UpdatePath+target, nil).Code, name)
	}
	rec := do(t, h, http.MethodGet, UpdatePath, nil)
	var l Listing
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	assert.Empty(t, l.Binaries)
	assert.Empty(t, l.Withheld)
	assert.NotContains(t, rec.Body.String(), b.SHA256)
}
