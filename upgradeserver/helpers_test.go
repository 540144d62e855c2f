package upgradeserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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

// shared is the store of that release, written, signed and indexed once
// in a directory TestMain owns: doing so took each download test longer
// than the rest of it. The tests' servers only read it.
var shared struct {
	dir   string
	once  sync.Once
	store *binstore.Store
	sum   string
}

// TestMain owns the shared store, which outlives each test.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "upgradeserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgradeserver tests:", err)
		os.Exit(1)
	}
	shared.dir = dir
	code := m.Run()
	if shared.store != nil {
		shared.store.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// bigStore is the store of one release of bigSize zeros, and its SHA-256.
func bigStore(t testing.TB) (*binstore.Store, string) {
	t.Helper()
	shared.once.Do(func() {
		sum := writeRelease(t, shared.dir, "", release, make([]byte, bigSize))
		s, err := binstore.New(shared.dir, zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{testKey.Public}})
		require.NoError(t, err)
		s.Scan()
		shared.store, shared.sum = s, sum
	})
	require.NotNil(t, shared.store, "the shared store was made")
	return shared.store, shared.sum
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
