package upgradeserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"aead.dev/minisign"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
)

// testKey signs every release these tests write; the test stores trust it.
var testKey = binstoretest.PackageKey()

// writeRelease lays out a signed release under dir/platform, as MinIO's
// release directories do, and returns its SHA-256.
func writeRelease(t testing.TB, dir, platform, release string, content []byte) string {
	t.Helper()
	return binstoretest.WriteRelease(t, dir, platform, release, content, testKey)
}

func newTestStore(t testing.TB, dir string) *binstore.Store {
	t.Helper()
	s, err := binstore.New(dir, zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{testKey.Public}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Scan()
	return s
}

func newTestHandler(t testing.TB, s Catalog) http.Handler {
	t.Helper()
	return New(Config{Store: s, Log: zerolog.Nop()}).Handler()
}

func do(t testing.TB, h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
