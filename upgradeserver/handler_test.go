package upgradeserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
)

const release = "RELEASE.2025-04-08T15-41-24Z"

func TestListingDescribesEveryVerifiedBinaryWithAbsoluteURLs(t *testing.T) {
	dir := t.TempDir()
	amd := writeRelease(t, dir, "linux-amd64", release, []byte("amd64 binary"))
	arm := writeRelease(t, dir, "linux-arm64", release, []byte("arm64 binary"))
	root := writeRelease(t, dir, "", release, []byte("root binary"))
	h := New(Config{Store: newTestStore(t, dir), Log: zerolog.Nop(),
		BaseURL: "https://object-store-operator.ops.svc.cluster.local:4221" + UpdatePath}).Handler()

	for _, target := range []string{UpdatePath, UpdatePath + "/"} {
		rec := do(t, h, http.MethodGet, "https://object-store-operator.ops.svc.cluster.local:4221"+target, nil)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var l Listing
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
		require.Len(t, l.Binaries, 3)

		byPath := map[string]ListedBinary{}
		for _, b := range l.Binaries {
			byPath[b.OS+"/"+b.Arch+"/"+b.SHA256] = b
		}
		base := "https://object-store-operator.ops.svc.cluster.local:4221" + UpdatePath
		got := byPath["linux/amd64/"+amd]
		assert.Equal(t, "minio."+release, got.Name)
		assert.Equal(t, release, got.Release)
		assert.Equal(t, int64(len("amd64 binary")), got.Size)
		assert.True(t, got.Signed)
		assert.Equal(t, binstore.FormatKeyID(testKey.Public.ID()), got.KeyID, "the key that verified it")
		assert.Equal(t, base+"/linux-amd64/minio."+release, got.URL)
		assert.Equal(t, base+"/linux-amd64/minio."+release+".sha256sum", got.SHA256SumURL)
		assert.Equal(t, base+"/linux-amd64/minio."+release+".minisig", got.MinisigURL)
		assert.Contains(t, byPath, "linux/arm64/"+arm)

		atRoot := byPath["//"+root]
		assert.Equal(t, base+"/minio."+release, atRoot.URL)
		assert.Equal(t, base+"/minio."+release+".minisig", atRoot.MinisigURL)
	}
}

func TestListingAnswersConditionalRequests(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "linux-amd64", release, []byte("x"))
	h := newTestHandler(t, newTestStore(t, dir))
	first := do(t, h, http.MethodGet, UpdatePath, nil)
	require.Equal(t, http.StatusOK, first.Code)
	etag := first.Header().Get("ETag")
	require.NotEmpty(t, etag)

	again := do(t, h, http.MethodGet, UpdatePath, http.Header{"If-None-Match": {etag}})
	assert.Equal(t, http.StatusNotModified, again.Code)
	assert.Empty(t, again.Body.Bytes())

	head := do(t, h, http.MethodHead, UpdatePath, nil)
	assert.Equal(t, http.StatusOK, head.Code)
	assert.Equal(t, first.Header().Get("Content-Length"), head.Header().Get("Content-Length"))
	assert.Empty(t, head.Body.Bytes())
}

func TestDownloads(t *testing.T) {
	dir := t.TempDir()
	content := bytes.Repeat([]byte("0123456789"), 1000)
	digest := writeRelease(t, dir, "linux-amd64", release, content)
	h := newTestHandler(t, newTestStore(t, dir))
	bin := UpdatePath + "/linux-amd64/minio." + release
	sumFile, err := os.ReadFile(filepath.Join(dir, "linux-amd64", "minio."+release+".sha256sum"))
	require.NoError(t, err)

	tests := []struct {
		name       string
		method     string
		target     string
		header     http.Header
		wantCode   int
		wantBody   []byte
		wantHeader map[string]string
	}{
		{
			name: "whole binary", method: http.MethodGet, target: bin, wantCode: http.StatusOK, wantBody: content,
			wantHeader: map[string]string{
				"Content-Type": "application/octet-stream", "Content-Length": fmt.Sprint(len(content)),
				"ETag": `"` + digest + `"`, "Accept-Ranges": "bytes",
			},
		},
		{
			name: "HEAD has the headers and no body", method: http.MethodHead, target: bin, wantCode: http.StatusOK, wantBody: []byte{},
			wantHeader: map[string]string{"Content-Length": fmt.Sprint(len(content)), "ETag": `"` + digest + `"`},
		},
		{
			name: "resume with Range", method: http.MethodGet, target: bin, header: http.Header{"Range": {"bytes=9000-"}},
			wantCode: http.StatusPartialContent, wantBody: content[9000:],
			wantHeader: map[string]string{"Content-Range": fmt.Sprintf("bytes 9000-%d/%d", len(content)-1, len(content))},
		},
		{
			name: "If-None-Match with the digest", method: http.MethodGet, target: bin, header: http.Header{"If-None-Match": {`"` + digest + `"`}},
			wantCode: http.StatusNotModified, wantBody: []byte{},
		},
		{
			name: "unsatisfiable range", method: http.MethodGet, target: bin, header: http.Header{"Range": {"bytes=99999-"}},
			wantCode: http.StatusRequestedRangeNotSatisfiable,
		},
		{
			name: "checksum file as MinIO's client reads it", method: http.MethodGet, target: bin + ".sha256sum", wantCode: http.StatusOK, wantBody: sumFile,
			wantHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"},
		},
		{
			name: "signature", method: http.MethodGet, target: bin + ".minisig", wantCode: http.StatusOK,
			wantHeader: map[string]string{"Content-Type": "application/octet-stream"},
		},
		{name: "unknown release", method: http.MethodGet, target: UpdatePath + "/linux-amd64/minio.RELEASE.1999", wantCode: http.StatusNotFound},
		{name: "unknown path", method: http.MethodGet, target: "/webhook/v2/update", wantCode: http.StatusNotFound},
		{
			name: "POST is not allowed", method: http.MethodPost, target: bin, wantCode: http.StatusMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET, HEAD"},
		},
		{
			name: "DELETE on the listing is not allowed", method: http.MethodDelete, target: UpdatePath, wantCode: http.StatusMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET, HEAD"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, h, tt.method, tt.target, tt.header)
			assert.Equal(t, tt.wantCode, rec.Code)
			switch {
			case tt.wantBody == nil:
			case len(tt.wantBody) == 0:
				assert.Empty(t, rec.Body.Bytes())
			default:
				assert.Equal(t, tt.wantBody, rec.Body.Bytes())
			}
			for k, v := range tt.wantHeader {
				assert.Equal(t, v, rec.Header().Get(k), k)
			}
		})
	}
}

func TestMultiRangeDownloadReassembles(t *testing.T) {
	dir := t.TempDir()
	content := []byte("abcdefghijklmnopqrstuvwxyz")
	writeRelease(t, dir, "", release, content)
	h := newTestHandler(t, newTestStore(t, dir))
	rec := do(t, h, http.MethodGet, UpdatePath+"/minio."+release, http.Header{"Range": {"bytes=0-2,10-12"}})
	require.Equal(t, http.StatusPartialContent, rec.Code)
	_, params, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	require.NoError(t, err)
	mr := multipart.NewReader(rec.Body, params["boundary"])
	var parts []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		parts = append(parts, string(b))
	}
	assert.Equal(t, []string{"abc", "klm"}, parts)
}

// traversalTargets are raw request paths that try to leave the store.
var traversalTargets = []string{
	UpdatePath + "/../../../etc/passwd",
	UpdatePath + "/..%2f..%2f..%2fetc%2fpasswd",
	UpdatePath + "/%2e%2e/%2e%2e/etc/passwd",
	UpdatePath + "/%2e%2e%2f%2e%2e%2fsecret",
	UpdatePath + "/linux-amd64/..%5c..%5csecret",
	UpdatePath + "/..\\..\\secret",
	UpdatePath + "/%2fetc%2fpasswd",
	UpdatePath + "//etc/passwd",
	UpdatePath + "/minio." + release + "%00.sha256sum",
	UpdatePath + "/..",
	UpdatePath + "/../secret",
	UpdatePath + "/linux-amd64/../../secret",
	UpdatePath + "/%252e%252e/secret",
	// A platform directory that is a symlink to a signed release outside
	// the store (see the test below).
	UpdatePath + "/linux-arm64/minio." + release,
	UpdatePath + "/linux-arm64/minio." + release + ".sha256sum",
}

func TestTraversalNeverServesAFileOutsideTheStore(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	writeRelease(t, dir, "linux-amd64", release, []byte("inside"))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "secret"), []byte("TOP-SECRET"), 0o644))
	// A complete, correctly signed release outside the store, reachable
	// through a symlink named like a platform: only the store's refusal
	// to follow links out of its root keeps it out.
	writeRelease(t, filepath.Join(parent, "elsewhere"), "linux-arm64", release, []byte("TOP-SECRET"))
	require.NoError(t, os.Symlink(filepath.Join(parent, "elsewhere", "linux-arm64"), filepath.Join(dir, "linux-arm64")))
	store := newTestStore(t, dir)
	for _, b := range store.Current().Binaries() {
		assert.NotEqual(t, "linux-arm64", b.Platform, "a release behind a symlink out of the store is never listed")
	}
	h := newTestHandler(t, store)

	for _, target := range traversalTargets {
		t.Run(target, func(t *testing.T) {
			u, err := url.ParseRequestURI(target)
			require.NoError(t, err)
			req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "x", RequestURI: target}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, rec.Code)
			assert.NotContains(t, rec.Body.String(), "TOP-SECRET")
			assert.NotContains(t, rec.Body.String(), "root:")
		})
	}
}

func FuzzResolve(f *testing.F) {
	parent := f.TempDir()
	dir := filepath.Join(parent, "store")
	writeRelease(f, dir, "linux-amd64", release, []byte("inside"))
	require.NoError(f, os.WriteFile(filepath.Join(parent, "secret"), []byte("TOP-SECRET"), 0o644))
	s := newTestStore(f, dir)
	digest := commit(f, s, release, []byte("by digest"))
	commit(f, s, "RELEASE.2025-05-01T00-00-00Z", []byte("by digest"))
	h := newTestHandler(f, s)
	served := map[string]bool{"inside": true, "by digest": true}
	for _, b := range s.Current().All() {
		served[string(b.SHA256Sum())] = true
		served[string(b.Minisig())] = true
	}
	for _, target := range traversalTargets {
		f.Add(strings.TrimPrefix(target, UpdatePath))
	}
	f.Add("/linux-amd64/minio." + release)
	f.Add("/sha256/" + digest + "/minio." + release + ".sha256sum")
	f.Add("/sha256/" + digest + "/minio.RELEASE.2025-05-01T00-00-00Z")
	f.Add("/sha256/" + digest + "/../minio." + release)
	f.Fuzz(func(t *testing.T, suffix string) {
		u, err := url.ParseRequestURI(UpdatePath + suffix)
		if err != nil {
			return
		}
		req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "x", RequestURI: u.RequestURI()}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if strings.Contains(body, "TOP-SECRET") {
			t.Fatalf("%q served a file outside the store", suffix)
		}
		if rec.Code == http.StatusOK && rec.Header().Get("Content-Type") != "application/json" && !served[body] {
			t.Fatalf("%q served unexpected content %q", suffix, body)
		}
	})
}

// blockedWriter is a client that has stopped reading: Write blocks until
// released.
type blockedWriter struct {
	*httptest.ResponseRecorder
	started chan struct{}
	release chan struct{}
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return b.ResponseRecorder.Write(p)
}

func TestDownloadsPastTheLimitGet503WithRetryAfter(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "", "RELEASE.2025-04-08T15-41-24Z", make([]byte, 1<<20))
	h := New(Config{Store: newTestStore(t, dir), Log: zerolog.Nop(), MaxDownloads: 2}).Handler()
	const file = UpdatePath + "/minio.RELEASE.2025-04-08T15-41-24Z"

	release := make(chan struct{})
	var stalled []chan struct{}
	done := make(chan struct{}, 2)
	for range 2 {
		w := &blockedWriter{ResponseRecorder: httptest.NewRecorder(), started: make(chan struct{}, 1), release: release}
		stalled = append(stalled, w.started)
		go func() {
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, file, nil))
			done <- struct{}{}
		}()
	}
	for _, started := range stalled {
		<-started // both downloads hold their slot
	}
	rec := do(t, h, http.MethodGet, file, nil)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodHead, file, nil).Code, "HEAD sends no body and takes no slot")
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath, nil).Code, "the listing is still served")
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, file+".sha256sum", nil).Code, "so are the sidecars")

	close(release)
	<-done
	<-done
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, file, nil).Code, "a slot is free again")
}
