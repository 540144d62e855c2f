package binsource

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// zstdFrame is one zstd frame declaring a window of 1<<windowLog bytes
// (or, singleSegment, a content size of size), holding a tar entry of
// size zero bytes as RLE blocks, without the tar end marker.
func zstdFrame(t *testing.T, windowLog uint, size int, singleSegment bool) []byte {
	t.Helper()
	var b bytes.Buffer
	b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd})
	if singleSegment {
		b.WriteByte(0b11<<6 | 1<<5) // 8-byte content size, single segment
		var fcs [8]byte
		for i := range fcs {
			fcs[i] = byte(uint64(size+512) >> (8 * i))
		}
		b.Write(fcs[:])
	} else {
		b.WriteByte(0)
		b.WriteByte(byte(windowLog-10) << 3)
	}
	block := func(last bool, typ, n int, content []byte) {
		h := uint32(n)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		b.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
		b.Write(content)
	}
	var hdr bytes.Buffer
	require.NoError(t, tar.NewWriter(&hdr).WriteHeader(&tar.Header{Name: "var/zeros", Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}))
	block(size == 0, 0, hdr.Len(), hdr.Bytes())
	for left := size; left > 0; left -= 128 << 10 {
		n := min(left, 128<<10)
		block(left == n, 1, n, []byte{0})
	}
	return b.Bytes()
}

// decodeAll reads blob's content through decompress and returns the most
// the heap in use grew by, sampled as it read.
func decodeAll(t *testing.T, blob []byte) (heapGrowth uint64, err error) {
	t.Helper()
	runtime.GC()
	var before, now runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	sample := func() {
		runtime.ReadMemStats(&now)
		peak = max(peak, now.HeapAlloc)
	}
	content, err := registryguard.Decompress(bufio.NewReader(bytes.NewReader(blob)))
	if err == nil {
		defer content.Close()
		buf := make([]byte, 1<<20)
		for i := 0; err == nil; i++ {
			_, err = content.Read(buf)
			if i%64 == 0 {
				sample()
			}
		}
		if err == io.EOF {
			err = nil
		}
	}
	sample()
	return peak - before.HeapAlloc, err
}

// TestLayerDecodersHaveAMemoryBound: a zstd frame declaring a window above
// 8 MiB is refused before a decoder exists (the first frame, named) or by
// the decoder (a later frame); a single-segment frame is held to the same
// bound through its content size. A gzip layer of 32 MiB of zeros and a
// zstd layer made with the largest window allowed decode in bounded
// memory: well below the 32 MiB a decoder that held its output would take.
func TestLayerDecodersHaveAMemoryBound(t *testing.T) {
	for _, tt := range []struct {
		name string
		blob []byte
		says string
	}{
		{"first frame", zstdFrame(t, 29, 64<<20, false), "its zstd frame declares a window of 512 MiB; at most 8 MiB is decoded"},
		{"later frame", append(zstdFrame(t, 20, 0, false), zstdFrame(t, 29, 64<<20, false)...), "a zstd frame declares a window over 8 MiB"},
		{"single segment", zstdFrame(t, 0, 64<<20, true), "its zstd frame declares a window of 67109376 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			growth, err := decodeAll(t, tt.blob)
			require.Error(t, err)
			assert.Equal(t, "ImageTooLarge", reasonOf(err))
			assert.Contains(t, err.Error(), tt.says)
			assert.Less(t, growth, uint64(16<<20), "heap growth while refusing it")
		})
	}

	// A real layer within the bound decodes. The tar goes to both
	// compressors as it is written, a MiB of zeros at a time: no buffer
	// of its size exists, to be zeroed and copied.
	var zs, gz bytes.Buffer
	zw, err := zstd.NewWriter(&zs, zstd.WithWindowSize(registryguard.MaxZstdWindow))
	require.NoError(t, err)
	// The fastest level: what is tested is the decoder, whose window
	// deflate fixes at 32 KiB whatever the level.
	gw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	require.NoError(t, err)
	tw := tar.NewWriter(io.MultiWriter(zw, gw))
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "var/zeros", Mode: 0o644, Size: 32 << 20, Typeflag: tar.TypeReg}))
	zeros := make([]byte, 1<<20)
	for range 32 {
		_, err = tw.Write(zeros)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	require.NoError(t, gw.Close())
	for name, blob := range map[string][]byte{"zstd": zs.Bytes(), "gzip": gz.Bytes()} {
		growth, err := decodeAll(t, blob)
		require.NoError(t, err, name)
		t.Logf("%s: 32 MiB decoded with %d KiB heap growth", name, growth>>10)
		assert.Less(t, growth, uint64(registryguard.MaxZstdWindow+4<<20), "%s: the decoder holds at most its window and buffers", name)
	}
}

func TestAZstdWindowBombLayerIsImageTooLarge(t *testing.T) {
	bomb := zstdFrame(t, 29, 512<<20, false)
	f := testFetcher(t, binstore.Options{}, FetcherConfig{})
	_, err := f.readLayer(blobLayer{digest: hashOf(t, bomb), blob: bomb}, Platform{"linux", "amd64"}, "RELEASE.X", &pullBudget{1 << 30, 1 << 30})
	require.Error(t, err)
	assert.Equal(t, "ImageTooLarge", reasonOf(err))
	assert.Contains(t, err.Error(), "512 MiB")
}
