package binsource

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/binstore/binstoretest"
	"github.com/object-store-operator/operator/internal/registryguard"
	"github.com/object-store-operator/operator/internal/testutil"
)

// hostileRegistry is go-containerregistry's registry over TLS, except for
// repository "minio/huge-manifest", whose manifests are 5 MiB of padding,
// streamed (chunked) or with their length declared. It counts blob reads.
func hostileRegistry(t *testing.T) (host string, transport http.RoundTripper, blobGets *atomic.Int64) {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	blobGets = &atomic.Int64{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/minio/huge-manifest/manifests/") {
			body := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"pad":"` +
				strings.Repeat("x", 5<<20) + `"}}`)
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			if strings.HasSuffix(r.URL.Path, "declared") {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			if r.Method == http.MethodGet {
				for chunk := range slices.Chunk(body, 64<<10) {
					_, _ = w.Write(chunk)
					w.(http.Flusher).Flush()
				}
			}
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/minio/many-entries/manifests/") {
			mt, list := "application/vnd.oci.image.index.v1+json", "manifests"
			if strings.HasSuffix(r.URL.Path, "layers") {
				mt, list = "application/vnd.oci.image.manifest.v1+json", "layers"
			}
			w.Header().Set("Content-Type", mt)
			_, _ = w.Write(emptyEntries(mt, list))
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), srv.Client().Transport, blobGets
}

// emptyEntries is a manifest or index of nearly registryguard.MaxManifestSize whose list
// is "{}" repeated: 1.4 million descriptors.
func emptyEntries(mediaType, list string) []byte {
	body := make([]byte, 0, registryguard.MaxManifestSize)
	body = append(body, `{"schemaVersion":2,"mediaType":"`+mediaType+`","config":{},"`+list+`":[`...)
	for len(body)+3 < registryguard.MaxManifestSize-2 {
		body = append(body, "{},"...)
	}
	return append(body, "{}]}"...)
}

// TestAManifestOfMillionsOfEmptyEntriesIsRefusedBeforeDecoding: 4 MiB of
// "{}," in an index's manifests (or a manifest's layers) is 1.4 million
// descriptors, which go-containerregistry decodes into about 480 MiB. The
// entries are counted before anything decodes them: the pull fails as
// ImageTooLarge naming the list, and the heap grows by far less than the
// chart's 512 Mi limit.
func TestAManifestOfMillionsOfEmptyEntriesIsRefusedBeforeDecoding(t *testing.T) {
	host, transport, blobGets := hostileRegistry(t)
	f := testFetcher(t, binstore.Options{}, FetcherConfig{Transport: transport, Platforms: []Platform{{"linux", "amd64"}}})
	anonymous := &keychain{Keychain: authn.NewMultiKeychain()}
	for _, list := range []string{"manifests", "layers"} {
		var err error
		grew := testutil.HeapGrowth(func() {
			_, err = f.Ensure(context.Background(), host+"/minio/many-entries:"+list, anonymous)
		})
		require.Error(t, err, list)
		assert.Equal(t, "ImageTooLarge", reasonOf(err), "%s: %v", list, err)
		assert.Contains(t, err.Error(), fmt.Sprintf(`lists more than %d "%s" entries`, registryguard.MaxManifestArray, list))
		t.Logf("%s: 4 MiB of empty entries refused; heap grew by %d MiB", list, grew>>20)
		assert.Less(t, grew, int64(64<<20), "one 4 MiB %s list made the heap grow by %d MiB", list, grew>>20)
	}
	assert.Zero(t, blobGets.Load())
}

func TestRegistryMetadataIsBoundedBeforeItIsRead(t *testing.T) {
	// It shares nothing and measures no memory: it runs beside the others.
	t.Parallel()
	host, transport, blobGets := hostileRegistry(t)
	key := binstoretest.NewKey(t)
	bin := []byte("the binary")
	blob := gzipTar(t, map[string][]byte{"opt/bin/minio": bin, "opt/bin/minio.minisig": key.Sign(t, bin)}, 0)
	img := singleLayerImage(t, blob)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	// A 5 MiB label: the config is read whole, so its size is checked first.
	cfg.Config.Labels = map[string]string{"release": "RELEASE.X", "pad": strings.Repeat("x", 5<<20)}
	img, err = mutate.ConfigFile(img, cfg)
	require.NoError(t, err)
	ref, err := name.ParseReference(host + "/minio/huge-config:RELEASE.X")
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, remote.WithTransport(transport)))
	blobGets.Store(0)

	f := testFetcher(t, binstore.Options{}, FetcherConfig{Transport: transport, Platforms: []Platform{{"linux", "amd64"}}})
	anonymous := &keychain{Keychain: authn.NewMultiKeychain()}
	for _, tt := range []struct{ image, says string }{
		{host + "/minio/huge-config:RELEASE.X", "declares 5243"},
		{host + "/minio/huge-manifest:streamed", "is larger than 4194304 bytes"},
		{host + "/minio/huge-manifest:declared", "at most 4194304 are read"},
	} {
		_, err := f.Ensure(context.Background(), tt.image, anonymous)
		require.Error(t, err, tt.image)
		assert.Equal(t, "ImageTooLarge", reasonOf(err), "%s: %v", tt.image, err)
		assert.Contains(t, err.Error(), tt.says, tt.image)
	}
	assert.Zero(t, blobGets.Load(), "neither the oversized config nor any layer was read")
}

// TestALayerOfManySidecarLookalikesHoldsNoneOfThem: signature and checksum
// files are kept only beside the binary paths. A layer of 1,024 files of
// 4 KiB each named minio.minisig elsewhere allocates about what the same
// layer with other names does, not 4 MiB more.
func TestALayerOfManySidecarLookalikesHoldsNoneOfThem(t *testing.T) {
	const files = 1024
	layer := func(name string) []byte {
		content := map[string][]byte{}
		for i := range files {
			content[fmt.Sprintf("d%d/opt/bin/%s", i, name)] = bytes.Repeat([]byte{byte(i)}, maxSidecarSize)
		}
		return gzipTar(t, content, 0)
	}
	f := testFetcher(t, binstore.Options{}, FetcherConfig{})
	allocated := func(blob []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		found, err := f.readLayer(blobLayer{digest: hashOf(t, blob), blob: blob}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1 << 30, 1 << 30})
		require.NoError(t, err)
		require.Nil(t, found, "no binary in the layer")
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	baseline := allocated(layer("other"))
	lookalikes := allocated(layer("minio.minisig"))
	t.Logf("allocated reading the layer: %d KiB with other names, %d KiB with sidecar names", baseline>>10, lookalikes>>10)
	assert.Less(t, int64(lookalikes)-int64(baseline), int64(files*maxSidecarSize/4), "sidecar lookalikes are not kept")
}

// undeclaredConfig is an image whose manifest declares its config's size
// as unknown (-1), which go-containerregistry would read without bound.
type undeclaredConfig struct{ ggcrv1.Image }

func (i undeclaredConfig) Manifest() (*ggcrv1.Manifest, error) {
	m, err := i.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.Config.Size = -1
	return m, nil
}

func (i undeclaredConfig) ConfigFile() (*ggcrv1.ConfigFile, error) {
	panic("the config of undeclared size was read")
}

func TestAConfigOfUndeclaredSizeIsNotRead(t *testing.T) {
	_, err := configFile(undeclaredConfig{singleLayerImage(t, gzipTar(t, map[string][]byte{"x": nil}, 0))})
	require.Error(t, err)
	assert.Equal(t, "ImageTooLarge", reasonOf(err))
	assert.Contains(t, err.Error(), "declares -1 bytes")
}
