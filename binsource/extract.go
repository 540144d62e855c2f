package binsource

import (
	"archive/tar"
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// binaryPaths are where MinIO images keep the binary, preferred first.
var binaryPaths = []string{"opt/bin/minio", "usr/bin/minio"}

const maxSidecarSize = 4096

// extract reads the image's layers, newest first, until one holds the
// MinIO binary, and commits it with its sidecars once the whole blob
// matched its digest.
func (f *Fetcher) extract(ctx context.Context, img ggcrv1.Image, p Platform, rel string, src binstore.Source) (*binstore.Binary, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, registryguard.Classify("list layers", err)
	}
	limit := cmp.Or(max(f.cfg.MaxPullBytes, 0), math.MaxInt64)
	budget := &pullBudget{compressed: limit, uncompressed: limit}
	for i := len(layers) - 1; i >= 0; i-- {
		found, err := f.readLayer(layers[i], p, rel, budget)
		if err != nil {
			return nil, err
		}
		if found == nil {
			continue
		}
		src.LayerDigest = found.layer
		return f.commit(ctx, p, rel, found.staged, binstore.Candidate{
			WantSHA256: found.wantSHA256, Minisig: found.sig, Source: src, Signable: true, // read whole against its digest
		})
	}
	return nil, reasonf(errNoBinary, "no %s in any layer", strings.Join(binaryPaths, " or "))
}

// pullBudget is what one pull may still read.
type pullBudget struct{ compressed, uncompressed int64 }

// capped fails a read past *left bytes (nil: no bound), counting them.
type capped struct {
	r     io.Reader
	left  *int64
	what  string
	count func(int64)
}

func (c capped) Read(p []byte) (int, error) {
	if c.left != nil && *c.left <= 0 {
		return 0, reasonf(errImageTooLarge, "more than the pull's limit of %s bytes", c.what)
	}
	if c.left != nil && int64(len(p)) > *c.left {
		p = p[:*c.left]
	}
	n, err := c.r.Read(p)
	if c.left != nil {
		*c.left -= int64(n)
	}
	if c.count != nil {
		c.count(int64(n))
	}
	return n, err
}

// layerFind is a binary staged from one layer, with its sidecars.
type layerFind struct {
	staged            *binstore.Staged
	layer, wantSHA256 string
	sig               []byte
}

// readLayer streams one layer blob, staging the binary if it has one, then
// reads the blob to its end against the layer digest, so a registry that
// swaps a blob under a pinned digest lands nothing.
func (f *Fetcher) readLayer(layer ggcrv1.Layer, p Platform, rel string, budget *pullBudget) (found *layerFind, err error) {
	digest, err := layer.Digest()
	if err != nil {
		return nil, registryguard.Classify("layer digest", err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, registryguard.Classify("fetch layer "+digest.String(), err)
	}
	defer rc.Close()
	sum := sha256.New()
	raw := bufio.NewReaderSize(io.TeeReader(capped{rc, &budget.compressed, "compressed", f.count}, sum), 64<<10)
	content, err := registryguard.Decompress(raw)
	if err != nil {
		return nil, f.layerError(digest, sum, raw, "layer "+digest.String(), err)
	}
	defer content.Close()
	var staged *binstore.Staged
	defer func() {
		if err != nil && staged != nil {
			staged.Discard()
		}
	}()
	var binaryDir string
	sidecars := map[string][]byte{}
	tr := tar.NewReader(capped{content, &budget.uncompressed, "uncompressed", nil})
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, f.layerError(digest, sum, raw, "read layer "+digest.String(), err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		switch {
		case hdr.Typeflag == tar.TypeReg && slices.Contains(binaryPaths, name) && (staged == nil || preferred(name, binaryDir)):
			if staged != nil {
				staged.Discard()
			}
			if staged, err = f.cfg.Store.Stage(p.dir(), rel, tr, f.cfg.MaxSize); err != nil {
				if errors.Is(err, errBinaryTooLarge) {
					return nil, err
				}
				return nil, f.layerError(digest, sum, raw, "copy "+name+" of layer "+digest.String(), err)
			}
			binaryDir = path.Dir(name)
		case hdr.Typeflag == tar.TypeReg && isSidecarPath(name):
			if hdr.Size > maxSidecarSize {
				continue
			}
			data, err := io.ReadAll(io.LimitReader(tr, maxSidecarSize))
			if err != nil {
				return nil, f.layerError(digest, sum, raw, "read "+name+" of layer "+digest.String(), err)
			}
			sidecars[name] = data
		}
	}
	// The digest covers every byte sent, past the tar end marker too.
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return nil, f.layerError(digest, sum, raw, "read layer "+digest.String()+" to its end", err)
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != digest.String() {
		return nil, reasonf(errChecksum, "layer blob has digest %s, the manifest says %s", got, digest)
	}
	if staged == nil {
		return nil, nil
	}
	found = &layerFind{staged: staged, layer: digest.String(), sig: sidecars[binaryDir+"/minio.minisig"]}
	if sumFile, ok := sidecars[binaryDir+"/minio.sha256sum"]; ok {
		fields := strings.Fields(string(sumFile))
		if len(fields) == 0 || len(fields[0]) != 64 {
			return nil, reasonf(errChecksum, "%s/minio.sha256sum is malformed", binaryDir)
		}
		found.wantSHA256 = strings.ToLower(fields[0])
	}
	return found, nil
}

// layerError reports a failed layer read: a swapped blob usually shows as
// a read error or a corrupt stream, so when the bytes cannot be the blob
// the manifest names, the reason is the checksum.
func (f *Fetcher) layerError(digest ggcrv1.Hash, sum hash.Hash, raw io.Reader, what string, err error) error {
	if errors.Is(err, errImageTooLarge) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return registryguard.Classify(what, err)
	}
	// The rest of a small blob settles it; a large one is not read on.
	_, _ = io.Copy(io.Discard, io.LimitReader(raw, 1<<20))
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != digest.String() {
		return pullError(errChecksum, what+": "+reasonf(errChecksum, "layer blob does not match its digest %s", digest).Error(), err)
	}
	return registryguard.Classify(what, err)
}

// isSidecarPath reports whether p is a sidecar of a binary path: a layer
// of many lookalikes elsewhere holds no more than four in memory.
func isSidecarPath(p string) bool {
	return slices.ContainsFunc(binaryPaths, func(b string) bool { return p == b+".sha256sum" || p == b+".minisig" })
}

// preferred reports whether p beats a binary already found in dir.
func preferred(p, dir string) bool { return p == binaryPaths[0] && dir != path.Dir(binaryPaths[0]) }

// fromMirror adds res's release from the mirror for platforms to res,
// and reports whether it read anything.
func (f *Fetcher) fromMirror(ctx context.Context, res *Result, platforms []Platform) (bool, error) {
	ctx = registryguard.WithTarget(ctx, nil) // the platform's, not the pull's registry: dialled as is
	binName, err := binstore.BinaryName(res.Release)
	if err != nil {
		return false, reasonf(errInvalidImage, "%v", err)
	}
	// It may redirect to its object storage, over HTTPS when it is HTTPS.
	client := &http.Client{Transport: f.cfg.Transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 || (via[0].URL.Scheme == "https" && req.URL.Scheme != "https") {
			return fmt.Errorf("the release mirror redirected to %s: followed only over HTTPS, three times at most", req.URL.Redacted())
		}
		return nil
	}}
	pulled := false
	for _, p := range platforms {
		b, fetched, err := f.mirrorOne(ctx, client, p, res.Release, binName)
		if err != nil {
			return false, err
		}
		pulled = pulled || fetched
		res.add(p, b)
	}
	return pulled, nil
}

func (f *Fetcher) mirrorOne(ctx context.Context, client *http.Client, p Platform, rel, binName string) (*binstore.Binary, bool, error) {
	base := strings.TrimSuffix(f.cfg.MirrorURL, "/") + "/" + p.dir() + "/" + binName
	for _, b := range f.cfg.Store.Current().Claims(p.dir(), rel) {
		if b.Source != nil && b.Source.MirrorURL == base {
			return b, false, nil
		}
	}
	sumData, err := f.get(ctx, client, base+binstore.SHA256SumSuffix, maxSidecarSize)
	if err != nil {
		return nil, true, err
	}
	digest, sumName, err := binstore.ParseSHA256Sum(sumData)
	if err != nil || sumName != binName {
		return nil, true, reasonf(errChecksum, "%s%s is not a checksum of %s", base, binstore.SHA256SumSuffix, binName)
	}
	sig, err := f.get(ctx, client, base+binstore.MinisigSuffix, maxSidecarSize)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, true, err
	}
	body, err := open(ctx, client, base)
	if err != nil {
		return nil, true, err
	}
	defer body.Close()
	staged, err := f.cfg.Store.Stage(p.dir(), rel, capped{r: body, count: f.count}, f.cfg.MaxSize)
	if err != nil {
		return nil, true, registryguard.Classify("download "+base, err)
	}
	b, err := f.commit(ctx, p, rel, staged, binstore.Candidate{WantSHA256: digest, Minisig: sig, Source: binstore.Source{MirrorURL: base}})
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", base, err)
	}
	f.log.Info().Str("url", base).Str("platform", p.String()).Str("sha256", b.SHA256).Str("keyId", b.KeyID).
		Msg("binary from the release mirror verified; served")
	return b, true, nil
}

// open is the body of the mirror's 200 answer for url.
func open(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, reasonf(errPull, "%v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, registryguard.Classify("get "+url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, reasonf(reason.Sentinel(registryguard.StatusReason(resp.StatusCode)), "%s answered %d", url, resp.StatusCode)
	}
	return resp.Body, nil
}

func (f *Fetcher) get(ctx context.Context, client *http.Client, url string, limit int64) ([]byte, error) {
	body, err := open(ctx, client, url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data, err := io.ReadAll(capped{r: io.LimitReader(body, limit), count: f.count})
	if err != nil {
		return nil, registryguard.Classify("read "+url, err)
	}
	return data, nil
}

func (f *Fetcher) count(n int64) { f.bytes.Add(float64(n)) }
