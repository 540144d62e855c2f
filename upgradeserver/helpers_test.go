package upgradeserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
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

// bigSize is the size of the release the download tests hold: larger
// than what loopback's socket buffers take in (about 4 MiB), so a client
// that reads nothing holds its download in the server's write.
const bigSize = 32 << 20

// shared is that release, written and signed once into a directory TestMain
// owns, and linked into each test's store (writeBigRelease): writing and
// signing 32 MiB took each test longer than the rest of it.
var shared struct {
	dir  string
	once sync.Once
	sum  string
}

// TestMain owns the shared release's directory, which outlives each test.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "upgradeserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgradeserver tests:", err)
		os.Exit(1)
	}
	shared.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeBigRelease lays out the release of bigSize zeros in dir, as
// writeRelease would, and returns its SHA-256.
func writeBigRelease(t testing.TB, dir string) string {
	t.Helper()
	shared.once.Do(func() { shared.sum = writeRelease(t, shared.dir, "", release, make([]byte, bigSize)) })
	require.NotEmpty(t, shared.sum, "the shared release was written")
	for _, suffix := range []string{"", ".minisig", ".sha256sum"} {
		name := "minio." + release + suffix
		require.NoError(t, os.Link(filepath.Join(shared.dir, name), filepath.Join(dir, name)))
	}
	return shared.sum
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
