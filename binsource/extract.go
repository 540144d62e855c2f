package binsource

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// binaryPaths are where MinIO images keep the server binary, in order of
// preference.
var binaryPaths = []string{"opt/bin/minio", "usr/bin/minio"}

const maxSidecarSize = 4096

// found is what extraction produced for one platform.
type found struct {
	digest string
	size   int64
	signed bool
	// computed: the image had no .sha256sum, so the digest is ours.
	computed bool
}

// extract streams the MinIO binary of img into the store as name under
// platform. The newest layer holding a binary wins; its .sha256sum and
// .minisig siblings come from the same layer. Layers are read as streams:
// memory does not grow with the binary's size.
func extract(img v1.Image, storeDir, platform, name string, maxSize int64, count func(int64)) (*found, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, classify(fmt.Errorf("list layers: %w", err))
	}
	for i := len(layers) - 1; i >= 0; i-- {
		f, err := extractLayer(layers[i], storeDir, platform, name, maxSize, count)
		if err != nil || f != nil {
			return f, err
		}
	}
	return nil, fmt.Errorf("%w: no %s in any layer", errNoBinary, strings.Join(binaryPaths, " or "))
}

type countingReader struct {
	r     io.Reader
	count func(int64)
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.count(int64(n))
	return n, err
}

func extractLayer(layer v1.Layer, storeDir, platform, name string, maxSize int64, count func(int64)) (*found, error) {
	rc, err := layer.Uncompressed()
	if err != nil {
		return nil, classify(fmt.Errorf("fetch layer: %w", err))
	}
	defer rc.Close()
	tr := tar.NewReader(countingReader{rc, count})
	var land *landing
	var binaryDir string
	sidecars := map[string][]byte{}
	defer func() {
		if land != nil {
			land.abort()
		}
	}()
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, classify(fmt.Errorf("read layer: %w", err))
		}
		p := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		switch {
		case hdr.Typeflag == tar.TypeReg && isBinaryPath(p) && (land == nil || preferred(p, binaryDir)):
			if land != nil {
				land.abort()
			}
			if land, err = newLanding(storeDir, platform, name, maxSize); err != nil {
				return nil, err
			}
			binaryDir = path.Dir(p)
			if _, err := io.Copy(land, tr); err != nil {
				return nil, classify(fmt.Errorf("copy %s: %w", p, err))
			}
		case hdr.Typeflag == tar.TypeReg && (strings.HasSuffix(p, "/minio.sha256sum") || strings.HasSuffix(p, "/minio.minisig")):
			if hdr.Size > maxSidecarSize {
				continue
			}
			data, err := io.ReadAll(io.LimitReader(tr, maxSidecarSize))
			if err != nil {
				return nil, classify(fmt.Errorf("read %s: %w", p, err))
			}
			sidecars[p] = data
		}
	}
	if land == nil {
		return nil, nil
	}
	want := ""
	sumFile, hasSum := sidecars[binaryDir+"/minio.sha256sum"]
	if hasSum {
		fields := strings.Fields(string(sumFile))
		if len(fields) == 0 || len(fields[0]) != 64 {
			return nil, fmt.Errorf("%w: %s/minio.sha256sum is malformed", errChecksum, binaryDir)
		}
		want = strings.ToLower(fields[0])
	}
	sig := sidecars[binaryDir+"/minio.minisig"]
	size := land.n
	digest, err := land.commit(want, sig)
	land = nil
	if err != nil {
		return nil, err
	}
	return &found{digest: digest, size: size, signed: len(sig) > 0, computed: !hasSum}, nil
}

func isBinaryPath(p string) bool {
	for _, b := range binaryPaths {
		if p == b {
			return true
		}
	}
	return false
}

// preferred reports whether p beats a binary already found in dir.
func preferred(p, dir string) bool { return p == binaryPaths[0] && dir != path.Dir(binaryPaths[0]) }
