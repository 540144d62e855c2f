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
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// commit lands content as the release through the store's own path (as
// binsource does) and returns its SHA-256.
func commit(t testing.TB, s *binstore.Store, rel string, content []byte) string {
	t.Helper()
	st, err := s.Stage("linux-amd64", rel, bytes.NewReader(content), 1<<20)
	require.NoError(t, err)
	b, err := st.Commit(binstore.Candidate{Minisig: testKey.Sign(t, content), Source: binstore.Source{Image: "reg/x:" + rel}})
	require.NoError(t, err)
	return b.SHA256
}

func TestDigestPathsServeExactlyTheirBytes(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	mine, theirs := []byte("B's genuine binary"), []byte("A's relabelled binary")
	a := commit(t, s, release, theirs)
	b := commit(t, s, release, mine)
	h := newTestHandler(t, s)

	for digest, content := range map[string][]byte{a: theirs, b: mine} {
		dir := UpdatePath + "/sha256/" + digest + "/"
		sum := do(t, h, http.MethodGet, dir+"minio."+release+".sha256sum", nil)
		require.Equal(t, http.StatusOK, sum.Code)
		assert.Equal(t, digest+"  minio."+release+"\n", sum.Body.String())
		bin := do(t, h, http.MethodGet, dir+"minio."+release, nil)
		require.Equal(t, http.StatusOK, bin.Code)
		assert.Equal(t, content, bin.Body.Bytes())
		assert.Equal(t, `"`+digest+`"`, bin.Header().Get("ETag"))
		part := do(t, h, http.MethodGet, dir+"minio."+release, http.Header{"Range": {"bytes=2-"}})
		assert.Equal(t, http.StatusPartialContent, part.Code)
		assert.Equal(t, content[2:], part.Body.Bytes())
		sig := do(t, h, http.MethodGet, dir+"minio."+release+".minisig", nil)
		require.Equal(t, http.StatusOK, sig.Code)
		assert.True(t, testKey.Verify(content, sig.Body.Bytes()))
	}
	for name, target := range map[string]string{
		"the plain path of a release claimed with other bytes": "/linux-amd64/minio." + release,
		"a digest under a release it was not stored under":     "/sha256/" + b + "/minio.RELEASE.2020-01-01T00-00-00Z",
		"a digest nothing has":                                 "/sha256/" + binstoretest.SHA256([]byte("x")) + "/minio." + release,
		"a digest with a platform":                             "/linux-amd64/sha256/" + b + "/minio." + release,
		"the store's own file layout":                          "/linux-amd64/sha256/" + b + "/minio." + release + ".source.json",
	} {
		assert.Equal(t, http.StatusNotFound, do(t, h, http.MethodGet, UpdatePath+target, nil).Code, name)
	}
	for name, target := range map[string]string{
		"upper-case digest": "/sha256/" + strings.ToUpper(b) + "/minio." + release,
		"short digest":      "/sha256/" + b[:63] + "/minio." + release,
		"encoded dots":      "/sha256/%2e%2e/minio." + release,
	} {
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, do(t, h, http.MethodGet, UpdatePath+target, nil).Code, name)
	}

	rec := do(t, h, http.MethodGet, UpdatePath, nil)
	var l Listing
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	assert.Empty(t, l.Binaries, "neither binary is listed under the release name")
	require.Len(t, l.Withheld, 1)
	assert.Equal(t, release, l.Withheld[0].Release)
	assert.Contains(t, l.Withheld[0].Reason, "2 different binaries")
}
