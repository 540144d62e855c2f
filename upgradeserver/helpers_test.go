package upgradeserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// writeRelease lays out minio.<release>, its .sha256sum and .minisig under
// dir/platform, as MinIO's release directories do.
func writeRelease(t testing.TB, dir, platform, release string, content []byte) string {
	t.Helper()
	d := filepath.Join(dir, platform)
	require.NoError(t, os.MkdirAll(d, 0o755))
	name := "minio." + release
	sum := sha256.Sum256(content)
	require.NoError(t, os.WriteFile(filepath.Join(d, name), content, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, name+".sha256sum"),
		fmt.Appendf(nil, "%s  %s\n", hex.EncodeToString(sum[:]), name), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, name+".minisig"), []byte("untrusted comment: signature\nRWQ...\n"), 0o644))
	return hex.EncodeToString(sum[:])
}

func newTestStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := NewStore(dir, zerolog.Nop(), StoreOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	s.Scan()
	return s
}

func newTestHandler(t testing.TB, s *Store) http.Handler {
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
