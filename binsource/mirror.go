package binsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/object-store-operator/operator/binstore"
)

// The release mirror is the fallback for releases no image provides: it
// serves <os>-<arch>/minio.<RELEASE>[.sha256sum|.minisig], as MinIO's
// release directories do. A binary from it is bound to its URL.

// fromMirror makes res's release available from the mirror for
// platforms, adding them to res; it reports whether it read anything.
func (f *Fetcher) fromMirror(ctx context.Context, res *Result, platforms []Platform) (bool, error) {
	// The mirror is the platform's, not the pull's registry: dialled as is.
	ctx = withPullTarget(ctx, nil)
	binName, err := binstore.BinaryName(res.Release)
	if err != nil {
		return false, reasonf(errInvalidImage, "%v", err)
	}
	// The mirror is the platform's: it may redirect to its object storage,
	// over HTTPS when it is HTTPS, three times at most.
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
	staged, err := f.cfg.Store.Stage(p.dir(), rel, countingReader{body, func(n int64) { f.bytes.Add(float64(n)) }}, f.cfg.MaxSize)
	if err != nil {
		return nil, true, classify("download "+base, err)
	}
	b, err := f.commit(ctx, p, rel, staged, binstore.Candidate{WantSHA256: digest, Minisig: sig, Source: binstore.Source{MirrorURL: base}})
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", base, err)
	}
	f.log.Info().Str("url", base).Str("platform", p.String()).Str("sha256", b.SHA256).Str("keyId", b.KeyID).
		Msg("binary from the release mirror verified; served")
	return b, true, nil
}

// open GETs url from the mirror: the body of its 200 answer.
func open(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, reasonf(errPull, "%v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, classify("get "+url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, httpStatusError(url, resp.StatusCode)
	}
	return resp.Body, nil
}

func (f *Fetcher) get(ctx context.Context, client *http.Client, url string, limit int64) ([]byte, error) {
	body, err := open(ctx, client, url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, limit))
	if err != nil {
		return nil, classify("read "+url, err)
	}
	f.bytes.Add(float64(len(data)))
	return data, nil
}

func httpStatusError(url string, code int) error {
	switch code {
	case http.StatusNotFound:
		return reasonf(errNotFound, "%s answered 404", url)
	case http.StatusUnauthorized, http.StatusForbidden:
		return reasonf(errAuth, "%s answered %d", url, code)
	}
	return reasonf(errPull, "%s answered %d", url, code)
}
