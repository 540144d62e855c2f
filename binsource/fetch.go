// Package binsource fills the upgrade server's store with the MinIO
// binaries the ObjectStores want: it pulls each ObjectStore's image
// (through the operator's trust pool, with the ObjectStore's pull Secrets),
// extracts the binary with its checksum and signature for every platform
// the store serves, and lands them atomically. A release mirror is the
// fallback for releases no image provides.
package binsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"

	"github.com/object-store-operator/operator/upgradeserver"
)

// Platform is an os/arch pair the store serves.
type Platform struct{ OS, Arch string }

// String is the os/arch form, e.g. linux/amd64.
func (p Platform) String() string { return p.OS + "/" + p.Arch }
func (p Platform) dir() string    { return upgradeserver.PlatformDir(p.OS, p.Arch) }

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, item := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(item), "/")
		if !ok || os == "" || arch == "" || !validPart(os) || !validPart(arch) {
			return nil, fmt.Errorf("platform %q is not <os>/<arch>", item)
		}
		out = append(out, Platform{os, arch})
	}
	return out, nil
}

func validPart(s string) bool {
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
}

// FetcherConfig configures a Fetcher.
type FetcherConfig struct {
	Store *upgradeserver.Store
	// Transport verifies registries and mirrors against the trust pool.
	Transport http.RoundTripper
	Platforms []Platform
	// MaxSize bounds one binary, protecting the disk.
	MaxSize int64
	// MirrorURL, if set, serves <os>-<arch>/minio.<RELEASE>[.sha256sum|.minisig].
	MirrorURL   string
	Concurrency int
	Registerer  prometheus.Registerer
	Log         zerolog.Logger
}

// Fetcher makes releases available in the store.
type Fetcher struct {
	cfg   FetcherConfig
	log   zerolog.Logger
	sem   chan struct{}
	group singleflight.Group

	originsMu sync.Mutex
	origins   map[string]string // release -> where it was fetched from

	pulls     *prometheus.CounterVec
	bytes     prometheus.Counter
	storeSize prometheus.Gauge
}

// Result says what Ensure made available.
type Result struct {
	Release   string
	Platforms []string
	// Source is "image", "mirror", or "store" when nothing had to be fetched.
	Source   string
	Unsigned bool
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	f := &Fetcher{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "binsource").Logger(),
		sem:     make(chan struct{}, cfg.Concurrency),
		origins: map[string]string{},
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_pulls_total",
			Help: "Release fetches by outcome (fetched, cached, or the failure reason).",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_pull_bytes_total",
			Help: "Bytes read from registries (uncompressed layer bytes) and mirrors.",
		}),
		storeSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_store_size_bytes",
			Help: "Total size of the binaries in the update store.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.pulls, f.bytes, f.storeSize} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register binsource metrics: %w", err)
			}
		}
	}
	return f, nil
}

// Ensure makes the release of image available for every platform. Callers
// wanting the same image with the same credentials share one fetch.
func (f *Fetcher) Ensure(ctx context.Context, image string, kc *keychain) (*Result, error) {
	v, err, _ := f.group.Do(image+"|"+kc.id, func() (any, error) {
		res, err := f.ensure(ctx, image, kc)
		outcome := "fetched"
		switch {
		case err != nil:
			outcome = reason(err)
		case res.Source == "store":
			outcome = "cached"
		}
		if err == nil {
			f.describe(res)
		}
		f.pulls.WithLabelValues(outcome).Inc()
		f.updateStoreSize()
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*Result), nil
}

func (f *Fetcher) ensure(ctx context.Context, image string, kc *keychain) (*Result, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	tag := ""
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	// A release tag already served everywhere needs no registry round trip.
	if strings.HasPrefix(tag, "RELEASE.") && f.haveAll(tag) {
		return &Result{Release: tag, Platforms: f.platformNames(), Source: "store"}, nil
	}

	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(f.cfg.Transport))
	if err != nil {
		err = classify(fmt.Errorf("get %s: %w", image, err))
		if f.cfg.MirrorURL != "" && strings.HasPrefix(tag, "RELEASE.") && (errors.Is(err, errNotFound) || errors.Is(err, errPull)) {
			f.log.Warn().Str("image", image).Str("reason", err.Error()).Msg("image unavailable; trying the release mirror")
			return f.fromMirror(ctx, tag)
		}
		return nil, err
	}
	images, err := f.platformImages(desc)
	if err != nil {
		return nil, err
	}
	release, err := releaseOf(images, tag)
	if err != nil {
		return nil, err
	}
	binName, err := upgradeserver.BinaryName(release)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	source := "image"
	var missing []Platform
	for _, p := range f.cfg.Platforms {
		img, ok := images[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		if f.cfg.Store.Has(p.dir(), binName) {
			continue
		}
		found, err := extract(img, f.cfg.Store.Dir(), p.dir(), binName, f.cfg.MaxSize, func(n int64) { f.bytes.Add(float64(n)) })
		if errors.Is(err, errNoBinary) && f.cfg.MirrorURL != "" {
			missing = append(missing, p)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", image, p, err)
		}
		ev := f.log.Info()
		if found.computed {
			ev = f.log.Warn().Str("reason", "the image has no minio.sha256sum/minio.minisig (hardened image)")
		}
		ev.Str("image", image).Str("platform", p.String()).Str("release", release).Str("sha256", found.digest).
			Int64("size", found.size).Bool("signed", found.signed).Bool("checksumComputed", found.computed).
			Msg("binary extracted from the image into the update store")
	}
	switch {
	case len(missing) > 0 && f.cfg.MirrorURL != "":
		if err := f.mirrorAll(ctx, binName, missing); err != nil {
			return nil, err
		}
		source, missing = "image+mirror", nil
	case len(missing) == len(f.cfg.Platforms):
		return nil, fmt.Errorf("%w: %s has no image for %s", errNoBinary, image, f.platformNames())
	}
	return f.served(release, binName, source, missing)
}

// served re-indexes the store and reports the platforms it now serves the
// release for, all but skip; a platform that was landed but is not listed
// is an error.
func (f *Fetcher) served(release, binName, source string, skip []Platform) (*Result, error) {
	f.cfg.Store.Scan()
	res := &Result{Release: release, Source: source}
	for _, p := range f.cfg.Platforms {
		if slices.Contains(skip, p) {
			continue
		}
		if !f.cfg.Store.Has(p.dir(), binName) {
			return nil, fmt.Errorf("%w: %s/%s was landed but the store does not list it; see the store's log", errPull, p.dir(), binName)
		}
		res.Platforms = append(res.Platforms, p.String())
	}
	return res, nil
}

// platformImages picks the image for every served platform from an index,
// or the one image with its own platform.
func (f *Fetcher) platformImages(desc *remote.Descriptor) (map[Platform]ggcrv1.Image, error) {
	out := map[Platform]ggcrv1.Image{}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, classify(fmt.Errorf("read index: %w", err))
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			return nil, classify(fmt.Errorf("read index manifest: %w", err))
		}
		for _, m := range manifest.Manifests {
			if m.Platform == nil {
				continue
			}
			p := Platform{m.Platform.OS, m.Platform.Architecture}
			if !slices.Contains(f.cfg.Platforms, p) {
				continue
			}
			if _, seen := out[p]; seen {
				continue
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				return nil, classify(fmt.Errorf("read %s image: %w", p, err))
			}
			out[p] = img
		}
		return out, nil
	}
	img, err := desc.Image()
	if err != nil {
		return nil, classify(fmt.Errorf("read image: %w", err))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, classify(fmt.Errorf("read image config: %w", err))
	}
	if p := (Platform{cfg.OS, cfg.Architecture}); slices.Contains(f.cfg.Platforms, p) {
		out[p] = img
	}
	return out, nil
}

// releaseOf reads the release from the image label "release" or
// "version", else from the tag.
func releaseOf(images map[Platform]ggcrv1.Image, tag string) (string, error) {
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return "", classify(fmt.Errorf("read image config: %w", err))
		}
		for _, label := range []string{"release", "version"} {
			if v := cfg.Config.Labels[label]; v != "" {
				return v, nil
			}
		}
	}
	if tag == "" || tag == "latest" {
		return "", fmt.Errorf("%w: no release/version label and no release tag", errInvalidImage)
	}
	return tag, nil
}

// fromMirror makes the release available from the mirror alone.
func (f *Fetcher) fromMirror(ctx context.Context, release string) (*Result, error) {
	binName, err := upgradeserver.BinaryName(release)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	if err := f.mirrorAll(ctx, binName, f.cfg.Platforms); err != nil {
		return nil, err
	}
	return f.served(release, binName, "mirror", nil)
}

// mirrorAll fetches <mirror>/<os>-<arch>/<binName>{.sha256sum,,.minisig}
// for every platform the store does not serve yet.
func (f *Fetcher) mirrorAll(ctx context.Context, binName string, platforms []Platform) error {
	client := &http.Client{Transport: f.cfg.Transport}
	for _, p := range platforms {
		if f.cfg.Store.Has(p.dir(), binName) {
			continue
		}
		if err := f.mirrorOne(ctx, client, p, binName); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fetcher) mirrorOne(ctx context.Context, client *http.Client, p Platform, binName string) error {
	base := strings.TrimSuffix(f.cfg.MirrorURL, "/") + "/" + p.dir() + "/" + binName
	sumData, err := f.get(ctx, client, base+upgradeserver.SHA256SumSuffix, maxSidecarSize)
	if err != nil {
		return err
	}
	digest, sumName, err := upgradeserver.ParseSHA256Sum(sumData)
	if err != nil || sumName != binName {
		return fmt.Errorf("%w: %s%s is not a checksum of %s", errChecksum, base, upgradeserver.SHA256SumSuffix, binName)
	}
	sig, err := f.get(ctx, client, base+upgradeserver.MinisigSuffix, maxSidecarSize)
	if err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errPull, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return classify(fmt.Errorf("get %s: %w", base, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpStatusError(base, resp.StatusCode)
	}
	land, err := newLanding(f.cfg.Store.Dir(), p.dir(), binName, f.cfg.MaxSize)
	if err != nil {
		return err
	}
	if _, err := io.Copy(land, countingReader{resp.Body, func(n int64) { f.bytes.Add(float64(n)) }}); err != nil {
		land.abort()
		return classify(fmt.Errorf("download %s: %w", base, err))
	}
	got, err := land.commit(digest, sig)
	if err != nil {
		return err
	}
	f.log.Info().Str("url", base).Str("platform", p.String()).Str("sha256", got).Bool("signed", len(sig) > 0).
		Msg("binary downloaded from the release mirror into the update store")
	return nil
}

func (f *Fetcher) get(ctx context.Context, client *http.Client, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPull, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, classify(fmt.Errorf("get %s: %w", url, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpStatusError(url, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, classify(fmt.Errorf("read %s: %w", url, err))
	}
	f.bytes.Add(float64(len(data)))
	return data, nil
}

func httpStatusError(url string, code int) error {
	switch code {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s answered 404", errNotFound, url)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: %s answered %d", errAuth, url, code)
	}
	return fmt.Errorf("%w: %s answered %d", errPull, url, code)
}

// describe completes a result from what is known rather than from what
// this call did: where the release came from (a later call may find it
// already in the store) and whether every platform's binary is signed.
func (f *Fetcher) describe(res *Result) {
	f.originsMu.Lock()
	if res.Source == "store" {
		if origin, ok := f.origins[res.Release]; ok {
			res.Source = origin
		}
	} else {
		f.origins[res.Release] = res.Source
	}
	f.originsMu.Unlock()
	res.Unsigned = false
	for _, b := range f.cfg.Store.Binaries() {
		if b.Release == res.Release && b.Platform != "" && !b.Signed {
			res.Unsigned = true
		}
	}
}

func (f *Fetcher) haveAll(release string) bool {
	binName, err := upgradeserver.BinaryName(release)
	if err != nil {
		return false
	}
	for _, p := range f.cfg.Platforms {
		if !f.cfg.Store.Has(p.dir(), binName) {
			return false
		}
	}
	return true
}

func (f *Fetcher) platformNames() []string {
	var out []string
	for _, p := range f.cfg.Platforms {
		out = append(out, p.String())
	}
	return out
}

func (f *Fetcher) updateStoreSize() {
	var total int64
	for _, b := range f.cfg.Store.Binaries() {
		total += b.Size
	}
	f.storeSize.Set(float64(total))
}
