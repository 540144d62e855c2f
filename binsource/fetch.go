// Package binsource fills the binary store with the MinIO binaries the
// ObjectStores want: it resolves each ObjectStore's image with that
// ObjectStore's own pull Secrets (through the operator's trust pool, over
// HTTPS), extracts the binary with its checksum and signature for every
// platform the store serves, and hands it to binstore, which verifies and
// lands it. A release mirror is the fallback for releases no image
// provides.
//
// A release is bound to its source: a binary already served is reused
// only for an image whose platform manifest has the digest it came from
// (or whose bytes were compared with it); anything else is pulled and
// compared, and other bytes are a conflict, never a replacement.
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
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"

	"github.com/object-store-operator/operator/binstore"
)

// Platform is an os/arch pair the store serves.
type Platform struct{ OS, Arch string }

// String is the os/arch form, e.g. linux/amd64.
func (p Platform) String() string { return p.OS + "/" + p.Arch }
func (p Platform) dir() string    { return binstore.PlatformDir(p.OS, p.Arch) }

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
	Store *binstore.Store
	// Transport verifies registries and mirrors against the trust pool.
	Transport http.RoundTripper
	Platforms []Platform
	// MaxSize bounds one binary, protecting the disk.
	MaxSize int64
	// MaxPullBytes bounds what one pull reads from a registry, compressed
	// and uncompressed alike (gzip bombs, endless layers). Default 4 GiB.
	MaxPullBytes int64
	// PullTimeout ends a pull (registry or mirror) that takes longer.
	// Default 10 minutes.
	PullTimeout time.Duration
	// InsecureRegistries are registry hosts (host[:port]) reached over
	// plain HTTP; every other registry is reached over HTTPS only.
	InsecureRegistries []string
	// MirrorURL, if set, serves <os>-<arch>/minio.<RELEASE>[.sha256sum|.minisig].
	MirrorURL string
	// Concurrency is how many pulls run at once; one registry host gets
	// at most half of them, so a registry that hangs cannot hold them all.
	Concurrency int
	Registerer  prometheus.Registerer
	Log         zerolog.Logger
}

// Fetcher makes releases available in the store.
type Fetcher struct {
	cfg      FetcherConfig
	log      zerolog.Logger
	sem      chan struct{}
	group    singleflight.Group
	registry http.RoundTripper

	mu      sync.Mutex
	perHost map[string]chan struct{}
	// same records platform manifests whose binary was compared with the
	// served one and found identical: manifest digest -> binary SHA-256.
	same map[string]string

	pulls *prometheus.CounterVec
	bytes prometheus.Counter
}

// Result says what Ensure made available.
type Result struct {
	Release   string
	Platforms []string
	// Sources says where each platform's served binary came from.
	Sources []string
	// KeyIDs are the minisign keys that verified the served binaries.
	KeyIDs []string
	// Binaries are the served binaries, one per entry of Platforms.
	Binaries []*binstore.Binary
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.MaxPullBytes <= 0 {
		cfg.MaxPullBytes = 4 << 30
	}
	if cfg.PullTimeout <= 0 {
		cfg.PullTimeout = 10 * time.Minute
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	f := &Fetcher{
		cfg:      cfg,
		log:      cfg.Log.With().Str("component", "binsource").Logger(),
		sem:      make(chan struct{}, cfg.Concurrency),
		registry: boundedManifests(httpsOnly(cfg.Transport, cfg.InsecureRegistries)),
		perHost:  map[string]chan struct{}{},
		same:     map[string]string{},
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_pulls_total",
			Help: "Release resolutions by outcome (fetched, cached, or the failure reason).",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_pull_bytes_total",
			Help: "Bytes read from registries (compressed layer bytes) and mirrors.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.pulls, f.bytes} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register binsource metrics: %w", err)
			}
		}
	}
	return f, nil
}

// httpsOnly refuses plain-HTTP requests to registries not listed as
// insecure. go-containerregistry falls back to HTTP for registries on
// private addresses whenever HTTPS fails, certificate errors included;
// this makes that fallback fail instead of silently downgrading.
func httpsOnly(next http.RoundTripper, insecure []string) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Scheme != "https" && !slices.Contains(insecure, req.URL.Host) {
			return nil, fmt.Errorf("%w: refusing plain HTTP to registry %s (it is not listed as insecure)", errUntrusted, req.URL.Host)
		}
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Ensure makes the release of image available for every platform, after
// resolving the image with kc (the ObjectStore's own credentials). Callers
// wanting the same image with the same credentials share one resolution.
func (f *Fetcher) Ensure(ctx context.Context, image string, kc *keychain) (*Result, error) {
	v, err, _ := f.group.Do(image+"|"+kc.id, func() (any, error) {
		ctx, cancel := context.WithTimeout(ctx, f.cfg.PullTimeout)
		defer cancel()
		res, pulled, err := f.ensure(ctx, image, kc)
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			err = joinReason(errTimeout, fmt.Errorf("pull of %s did not finish within %s: %w", image, f.cfg.PullTimeout, err))
		}
		outcome := "cached"
		switch {
		case err != nil:
			outcome = reason(err)
		case pulled:
			outcome = "fetched"
		}
		f.pulls.WithLabelValues(outcome).Inc()
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*Result), nil
}

// slot takes a pull slot and one of the registry host's share of them.
func (f *Fetcher) slot(ctx context.Context, host string) (func(), error) {
	f.mu.Lock()
	hostSem, ok := f.perHost[host]
	if !ok {
		hostSem = make(chan struct{}, max(1, f.cfg.Concurrency/2))
		f.perHost[host] = hostSem
	}
	f.mu.Unlock()
	select {
	case hostSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case f.sem <- struct{}{}:
		return func() { <-f.sem; <-hostSem }, nil
	case <-ctx.Done():
		<-hostSem
		return nil, ctx.Err()
	}
}

func (f *Fetcher) ensure(ctx context.Context, image string, kc *keychain) (*Result, bool, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	if slices.Contains(f.cfg.InsecureRegistries, ref.Context().RegistryStr()) {
		if ref, err = name.ParseReference(image, name.Insecure); err != nil {
			return nil, false, fmt.Errorf("%w: %v", errInvalidImage, err)
		}
	}
	tag := ""
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	release, err := f.slot(ctx, ref.Context().RegistryStr())
	if err != nil {
		return nil, false, err
	}
	defer release()

	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(f.registry))
	if err != nil {
		err = classify(fmt.Errorf("get %s: %w", image, err))
		if f.cfg.MirrorURL != "" && strings.HasPrefix(tag, "RELEASE.") && (errors.Is(err, errNotFound) || errors.Is(err, errPull)) {
			f.log.Warn().Str("image", image).Str("reason", err.Error()).Msg("image unavailable; trying the release mirror")
			return f.fromMirror(ctx, tag, f.cfg.Platforms)
		}
		return nil, false, err
	}
	images, err := f.platformImages(desc)
	if err != nil {
		return nil, false, err
	}
	rel, err := releaseOf(images, tag)
	if err != nil {
		return nil, false, err
	}
	if _, err := binstore.BinaryName(rel); err != nil {
		return nil, false, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	res := &Result{Release: rel}
	pulled := false
	var missing []Platform
	for _, p := range f.cfg.Platforms {
		img, ok := images[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		b, fetched, err := f.fromImage(ctx, ref, image, img, p, rel)
		if errors.Is(err, errNoBinary) && f.cfg.MirrorURL != "" {
			missing = append(missing, p)
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s for %s: %w", image, p, err)
		}
		pulled = pulled || fetched
		res.add(p, b)
	}
	switch {
	case len(missing) > 0 && f.cfg.MirrorURL != "":
		mirrored, fetched, err := f.fromMirror(ctx, rel, missing)
		if err != nil {
			return nil, false, err
		}
		pulled = pulled || fetched
		res.Platforms = append(res.Platforms, mirrored.Platforms...)
		res.Sources = append(res.Sources, mirrored.Sources...)
		res.KeyIDs = append(res.KeyIDs, mirrored.KeyIDs...)
		res.Binaries = append(res.Binaries, mirrored.Binaries...)
	case len(res.Platforms) == 0:
		return nil, false, fmt.Errorf("%w: %s has no image for %s", errNoBinary, image, strings.Join(f.platformNames(), ", "))
	}
	return res, pulled, nil
}

func (r *Result) add(p Platform, b *binstore.Binary) {
	r.Platforms = append(r.Platforms, p.String())
	r.Binaries = append(r.Binaries, b)
	src := "the store directory"
	if b.Source != nil {
		src = b.Source.String()
	}
	r.Sources = append(r.Sources, src)
	if !slices.Contains(r.KeyIDs, b.KeyID) {
		r.KeyIDs = append(r.KeyIDs, b.KeyID)
	}
}

// fromImage returns the served binary for the platform image, pulling it
// unless the store already serves this very manifest's binary. It reports
// whether blobs were read.
func (f *Fetcher) fromImage(ctx context.Context, ref name.Reference, image string, img ggcrv1.Image, p Platform, rel string) (*binstore.Binary, bool, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, false, classify(fmt.Errorf("digest of the %s image: %w", p, err))
	}
	b, unlock, err := f.lockUnlessServed(ctx, p, rel, func() *binstore.Binary { return f.servedFor(p, rel, digest.String()) })
	if b != nil || err != nil {
		return b, false, err
	}
	defer unlock()
	src := binstore.Source{Image: image, Registry: ref.Context().RegistryStr(), Repository: ref.Context().RepositoryStr(), ManifestDigest: digest.String()}
	if b, err = f.extract(img, p, rel, src); err != nil {
		return nil, true, err
	}
	f.mu.Lock()
	f.same[digest.String()] = b.SHA256
	f.mu.Unlock()
	f.log.Info().Str("image", image).Str("platform", p.String()).Str("release", rel).Str("sha256", b.SHA256).
		Int64("size", b.Size).Str("keyId", b.KeyID).Str("manifest", digest.String()).
		Msg("binary from the image verified; served")
	return b, true, nil
}

// lockUnlessServed returns served()'s binary if there is one; otherwise it
// takes the release's lock and looks again, since another replica on a
// shared volume may have landed it meanwhile. With no binary and no error,
// the caller holds the lock and must call unlock.
func (f *Fetcher) lockUnlessServed(ctx context.Context, p Platform, rel string, served func() *binstore.Binary) (b *binstore.Binary, unlock func(), err error) {
	if b := served(); b != nil {
		return b, nil, nil
	}
	unlock, err = f.cfg.Store.Lock(ctx, p.dir(), rel)
	if err != nil {
		return nil, nil, joinReason(errPull, err)
	}
	f.cfg.Store.Scan()
	if b := served(); b != nil {
		unlock()
		return b, nil, nil
	}
	return nil, unlock, nil
}

// servedFor returns the served binary if it is known to be the platform
// manifest's: it came from that manifest, or was compared with it.
func (f *Fetcher) servedFor(p Platform, rel, manifest string) *binstore.Binary {
	f.mu.Lock()
	same := f.same[manifest]
	f.mu.Unlock()
	// Other images may claim the release with other bytes: only this
	// manifest's own binary will do.
	for _, b := range f.cfg.Store.Current().Claims(p.dir(), rel) {
		if (b.Source != nil && b.Source.ManifestDigest == manifest) || (same != "" && b.SHA256 == same) {
			return b
		}
	}
	return nil
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
	cfg, err := configFile(img)
	if err != nil {
		return nil, err
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
		cfg, err := configFile(img)
		if err != nil {
			return "", err
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

// fromMirror makes the release available from the mirror for platforms.
func (f *Fetcher) fromMirror(ctx context.Context, rel string, platforms []Platform) (*Result, bool, error) {
	binName, err := binstore.BinaryName(rel)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errInvalidImage, err)
	}
	client := &http.Client{Transport: f.cfg.Transport}
	res := &Result{Release: rel}
	pulled := false
	for _, p := range platforms {
		b, fetched, err := f.mirrorOne(ctx, client, p, rel, binName)
		if err != nil {
			return nil, false, err
		}
		pulled = pulled || fetched
		res.add(p, b)
	}
	return res, pulled, nil
}

func (f *Fetcher) mirrorOne(ctx context.Context, client *http.Client, p Platform, rel, binName string) (*binstore.Binary, bool, error) {
	base := strings.TrimSuffix(f.cfg.MirrorURL, "/") + "/" + p.dir() + "/" + binName
	fromMirror := func() *binstore.Binary {
		for _, b := range f.cfg.Store.Current().Claims(p.dir(), rel) {
			if b.Source != nil && b.Source.MirrorURL == base {
				return b
			}
		}
		return nil
	}
	b, unlock, err := f.lockUnlessServed(ctx, p, rel, fromMirror)
	if b != nil || err != nil {
		return b, false, err
	}
	defer unlock()
	sumData, err := f.get(ctx, client, base+binstore.SHA256SumSuffix, maxSidecarSize)
	if err != nil {
		return nil, true, err
	}
	digest, sumName, err := binstore.ParseSHA256Sum(sumData)
	if err != nil || sumName != binName {
		return nil, true, fmt.Errorf("%w: %s%s is not a checksum of %s", errChecksum, base, binstore.SHA256SumSuffix, binName)
	}
	sig, err := f.get(ctx, client, base+binstore.MinisigSuffix, maxSidecarSize)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", errPull, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, true, classify(fmt.Errorf("get %s: %w", base, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, true, httpStatusError(base, resp.StatusCode)
	}
	staged, err := f.cfg.Store.Stage(p.dir(), rel, countingReader{resp.Body, func(n int64) { f.bytes.Add(float64(n)) }}, f.cfg.MaxSize)
	if err != nil {
		return nil, true, classify(fmt.Errorf("download %s: %w", base, err))
	}
	b, err = staged.Commit(binstore.Candidate{WantSHA256: digest, Minisig: sig, Source: binstore.Source{MirrorURL: base}})
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", base, err)
	}
	f.log.Info().Str("url", base).Str("platform", p.String()).Str("sha256", b.SHA256).Str("keyId", b.KeyID).
		Msg("binary from the release mirror verified; served")
	return b, true, nil
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

func (f *Fetcher) platformNames() []string {
	var out []string
	for _, p := range f.cfg.Platforms {
		out = append(out, p.String())
	}
	return out
}
