package upgradeserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
// than the rest of it. TestMain starts making it at once, so that it is
// made on the second core while the serial tests run (the download tests
// that need it run in parallel, after them). The tests' servers only read
// it.
var shared struct {
	dir   string
	ready chan struct{} // closed once store and sum, or err, are set
	store *binstore.Store
	sum   string
	err   error
}

// TestMain owns the shared store, which outlives each test.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "upgradeserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgradeserver tests:", err)
		os.Exit(1)
	}
	shared.dir = dir
	shared.ready = make(chan struct{})
	go func() {
		defer close(shared.ready)
		shared.store, shared.sum, shared.err = makeBigStore(dir)
	}()
	code := m.Run()
	<-shared.ready
	if shared.store != nil {
		shared.store.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// makeBigStore lays out one release of bigSize zeros in dir as
// writeRelease does (without a testing.TB: no test runs yet), indexes it,
// and returns the store and the release's SHA-256.
func makeBigStore(dir string) (*binstore.Store, string, error) {
	content := make([]byte, bigSize)
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	prehash := minisign.NewReader(bytes.NewReader(content))
	if _, err := io.Copy(io.Discard, prehash); err != nil {
		return nil, "", fmt.Errorf("hash the release: %w", err)
	}
	name := "minio." + release
	for file, data := range map[string][]byte{
		name:                content,
		name + ".minisig":   prehash.SignWithComments(testKey.Private, "timestamp:0\tfile:test", "signature from a test key"),
		name + ".sha256sum": []byte(digest + "  " + name + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			return nil, "", fmt.Errorf("write the release: %w", err)
		}
	}
	s, err := binstore.New(dir, zerolog.Nop(), binstore.Options{TrustedKeys: []minisign.PublicKey{testKey.Public}})
	if err != nil {
		return nil, "", fmt.Errorf("open the store: %w", err)
	}
	s.Scan()
	return s, digest, nil
}

// bigStore is the store of one release of bigSize zeros, and its SHA-256.
func bigStore(t testing.TB) (*binstore.Store, string) {
	t.Helper()
	<-shared.ready
	require.NoError(t, shared.err)
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
