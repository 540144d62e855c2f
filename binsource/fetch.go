// Package binsource fills the binary store with the MinIO binaries the
// ObjectStores want: it resolves each ObjectStore's image with its own
// pull Secrets, extracts the binary with its checksum and signature for
// every platform served, and hands it to binstore, which verifies and
// lands it. A release mirror is the fallback for releases no image has.
//
// A stored binary is reused only for an image whose platform manifest is
// known to hold it; anything else is pulled.
package binsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/registryguard"
)

// Platform is an os/arch pair the store serves.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }
func (p Platform) dir() string    { return binstore.PlatformDir(p.OS, p.Arch) }

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, item := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(item), "/")
		if !ok || !binstore.ValidPlatform(binstore.PlatformDir(os, arch)) {
			return nil, fmt.Errorf("platform %q is not <os>/<arch>", item)
		}
		out = append(out, Platform{os, arch})
	}
	return out, nil
}

// FetcherConfig configures a Fetcher.
// A zero bound bounds nothing.
type FetcherConfig struct {
	Store *binstore.Store
	// Transport verifies registries and mirrors against the trust pool.
	Transport http.RoundTripper
	Platforms []Platform
	// MaxSize bounds one binary; MaxPullBytes what one pull reads from a
	// registry, compressed and uncompressed alike (gzip bombs, endless
	// layers); PullTimeout how long a pull runs.
	MaxSize, MaxPullBytes int64
	PullTimeout           time.Duration
	// InsecureRegistries (host[:port]) are reached over plain HTTP; every
	// other registry over HTTPS only.
	InsecureRegistries []string
	// StoreMaxBytes bounds the distinct bytes stored, NamespaceMaxBytes
	// those one unit is charged for (quota.go).
	StoreMaxBytes, NamespaceMaxBytes int64
	// MirrorURL, if set, serves <os>-<arch>/minio.<RELEASE>[.sha256sum|.minisig].
	MirrorURL string
	// Concurrency is how many pulls run at once, PerNamespace how many of
	// one unit (0 counts as 1); one registry server gets at most half, so
	// one that hangs cannot hold them all.
	Concurrency, PerNamespace int
	// Resolver finds the addresses behind a registry's name, so two names
	// of one server share its slots; a name not resolved within
	// ResolveTimeout counts as itself.
	Resolver       registryguard.Resolver
	ResolveTimeout time.Duration
	Clock          clock.PassiveClock // default the real clock
	Registerer     prometheus.Registerer
	Log            zerolog.Logger
}

// Fetcher makes releases available in the store.
type Fetcher struct {
	cfg      FetcherConfig
	log      zerolog.Logger
	queue    *pullQueue
	registry http.RoundTripper

	mu      sync.Mutex
	refs    map[string]references // by ObjectStore key (quota.go)
	quotaMu sync.Mutex            // held from a quota check until the binary landed

	pulls *prometheus.CounterVec
	bytes prometheus.Counter
	// took has no reason label: a histogram multiplies its buckets by each.
	took *prometheus.HistogramVec
}

// Outcomes of a pull, as the duration histogram's label.
const (
	pullFetched = "fetched"
	pullCached  = "cached"
	pullFailed  = "failed"
)

// Result says what a pull made available: per platform, the served
// binary, its source, and whether the image shipped no .minisig for it;
// and the keys that verified them.
type Result struct {
	Release                    string
	Platforms, Sources, KeyIDs []string
	Binaries                   []*binstore.Binary
	Unsigned                   []bool
}

// NewFetcher returns a Fetcher with its metrics registered.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	f := &Fetcher{
		cfg:      cfg,
		log:      cfg.Log.With().Str("component", "binsource").Logger(),
		queue:    newPullQueue(cfg.Concurrency, cfg.PerNamespace, cfg.Concurrency/2),
		registry: registryguard.BoundedManifests(registryguard.OwnTokenService(registryguard.QuietElsewhere(registryguard.HTTPSOnly(cfg.Transport, cfg.InsecureRegistries)))),
		refs:     map[string]references{},
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_pulls_total",
			Help: "Release resolutions by outcome (fetched, cached, or the failure reason).",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_pull_bytes_total",
			Help: "Bytes read from registries (compressed layer bytes) and mirrors.",
		}),
		took: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "objectstore_operator_pull_duration_seconds",
			Help: "How long release resolutions ran, from their slot to their end (waiting for a slot is not counted), by outcome (fetched, cached, failed).",
			// From a cached answer to the default pull deadline.
			Buckets: []float64{0.05, 0.25, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"outcome"}),
	}
	// A rate reads 0, not nothing, before the first pull.
	for _, o := range []string{pullFetched, pullCached, pullFailed} {
		f.took.WithLabelValues(o)
	}
	collectors := []prometheus.Collector{f.pulls, f.bytes, f.took, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "objectstore_operator_pulls_running",
		Help: "Pulls running now (at most the pull concurrency setting).",
	}, func() float64 { r, _ := f.queue.stats(); return float64(r) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "objectstore_operator_pulls_queued",
		Help: "Pulls waiting for a slot (their unit's or registry's share is taken, or every slot is).",
	}, func() float64 { _, q := f.queue.stats(); return float64(q) })}
	if cfg.StoreMaxBytes > 0 { // a size/limit ratio never divides by 0
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "objectstore_operator_store_max_bytes",
			Help: "Most distinct binary bytes the store may hold; a pull past it is StoreFull.",
		}, func() float64 { return float64(cfg.StoreMaxBytes) }))
	}
	if cfg.Registerer != nil {
		for _, c := range collectors {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register binsource metrics: %w", err)
			}
		}
	}
	return f, nil
}

// Submit queues a pull of image with kc for an ObjectStore of namespace
// ns and returns at once; done gets the result, unless withdrawn. unit
// ("": ns) is whose slots and store share it counts against. The same
// image with the same credentials, namespace and unit is one pull.
// PullTimeout runs from the pull's start.
func (f *Fetcher) Submit(ctx context.Context, ns, unit, image string, kc *keychain, done func(*Result, error)) (withdraw func()) {
	if unit == "" {
		unit = ns
	}
	canonical := ""
	if ref, err := name.ParseReference(image); err == nil {
		registry := ref.Context().RegistryStr()
		canonical = registryguard.CanonicalHost(registry, slices.Contains(f.cfg.InsecureRegistries, registry))
	}
	// The pull dials the address it counts against (set before run).
	target := &registryguard.Target{Host: canonical}
	resolve := func(ctx context.Context) []string {
		if canonical == "" {
			return nil // not an image reference: the pull fails at once
		}
		target.Addr = registryguard.Key(ctx, f.cfg.Resolver, f.cfg.ResolveTimeout, canonical)
		return []string{target.Addr}
	}
	run := func(ctx context.Context) (*Result, error) {
		ctx, cancel := withBound(ctx, f.cfg.PullTimeout)
		defer cancel()
		if canonical != "" {
			ctx = registryguard.WithTarget(ctx, target)
		}
		ctx = withUnit(ctx, unit)
		start := time.Now()
		res, pulled, err := f.ensure(ctx, image, kc)
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			err = pullError(errTimeout, fmt.Sprintf("pull of %s did not finish within %s: %s", image, f.cfg.PullTimeout, err), err)
		}
		outcome, took := pullCached, pullCached
		switch {
		case err != nil:
			outcome, took = reasonOf(err), pullFailed
		case pulled:
			outcome, took = pullFetched, pullFetched
		}
		f.pulls.WithLabelValues(outcome).Inc()
		f.took.WithLabelValues(took).Observe(time.Since(start).Seconds())
		return res, err
	}
	return f.queue.submit(ctx, unit, ns+"\x00"+unit+"\x00"+image+"\x00"+kc.id, resolve, run, done)
}

func (f *Fetcher) ensure(ctx context.Context, image string, kc *keychain) (*Result, bool, error) {
	ref, err := name.ParseReference(image)
	if err == nil && slices.Contains(f.cfg.InsecureRegistries, ref.Context().RegistryStr()) {
		ref, err = name.ParseReference(image, name.Insecure)
	}
	if err != nil {
		return nil, false, reasonf(errInvalidImage, "%v", err)
	}
	tag := ""
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(f.registry))
	if err != nil {
		err = registryguard.Classify("get "+image, err)
		if f.cfg.MirrorURL != "" && strings.HasPrefix(tag, "RELEASE.") && (errors.Is(err, errNotFound) || errors.Is(err, errPull)) {
			if err := f.releaseInFuture(tag); err != nil {
				return nil, false, err
			}
			f.log.Warn().Str("image", image).Str("reason", err.Error()).Msg("image unavailable; trying the release mirror")
			res := &Result{Release: tag}
			pulled, err := f.fromMirror(ctx, res, f.cfg.Platforms)
			return res, pulled, err
		}
		return nil, false, err
	}
	private := f.needsCredentials(ctx, ref, kc, desc.Digest)
	images, err := f.platformImages(desc)
	if err != nil {
		return nil, false, err
	}
	rel, err := releaseOf(images, tag)
	if err != nil {
		return nil, false, err
	}
	if _, err := binstore.BinaryName(rel); err != nil {
		return nil, false, reasonf(errInvalidImage, "%v", err)
	}
	if err := f.releaseInFuture(rel); err != nil {
		return nil, false, err
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
		b, fetched, err := f.fromImage(ctx, ref, image, img, p, rel, private)
		if errors.Is(err, errNoBinary) && f.cfg.MirrorURL != "" {
			missing = append(missing, p)
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s for %s: %w", image, p, err)
		}
		pulled = pulled || fetched
		res.add(p, b)
		if manifest, err := img.Digest(); err == nil {
			// An image that shipped no .minisig has its binary signed for
			// each of its ObjectStores, whatever signature the stored
			// bytes have from another image.
			_, res.Unsigned[len(res.Unsigned)-1] = b.FromManifest(manifest.String())
		}
	}
	switch {
	case len(missing) > 0 && f.cfg.MirrorURL != "":
		fetched, err := f.fromMirror(ctx, res, missing)
		if err != nil {
			return nil, false, err
		}
		pulled = pulled || fetched
	case len(res.Platforms) == 0:
		return nil, false, reasonf(errNoBinary, "%s has no image for %s", image, strings.Join(f.platformNames(), ", "))
	}
	return res, pulled, nil
}

// maxReleaseSkew is how far ahead of the operator's clock a release's
// time may be: clocks differ, and a release is published as it is named.
const maxReleaseSkew = time.Hour

// releaseLayout is the time in a MinIO release name, RELEASE.<time>[.suffix].
const releaseLayout = "2006-01-02T15-04-05Z"

// releaseInFuture refuses a release named after a time to come: names
// sort by time, and housekeeping keeps rollback targets by that order.
func (f *Fetcher) releaseInFuture(rel string) error {
	at, ok := releaseTime(rel)
	if !ok {
		return nil
	}
	now := f.cfg.Clock.Now()
	if at.After(now.Add(maxReleaseSkew)) {
		return reasonf(errReleaseInFuture, "%s names %s, more than %s after the operator's clock (%s)",
			registryguard.Bounded(rel, 128), at.Format(time.RFC3339), maxReleaseSkew, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// releaseTime is the time a release name gives; false for none.
func releaseTime(rel string) (time.Time, bool) {
	s, ok := strings.CutPrefix(rel, "RELEASE.")
	if !ok || len(s) < len(releaseLayout) {
		return time.Time{}, false
	}
	at, err := time.Parse(releaseLayout, s[:len(releaseLayout)])
	return at, err == nil
}

// needsCredentials reports whether the image, read with kc as digest, is
// private: the pull used credentials and an anonymous HEAD does not answer
// with that very digest. What anyone can read is public whatever
// credentials a tenant added (registries accept them against rate
// limits); in doubt the binary is private.
func (f *Fetcher) needsCredentials(ctx context.Context, ref name.Reference, kc *keychain, digest ggcrv1.Hash) bool {
	if !usesCredentials(kc, ref.Context()) {
		return false
	}
	anon, err := remote.Head(ref, remote.WithContext(ctx), remote.WithAuth(authn.Anonymous), remote.WithTransport(f.registry))
	if err != nil {
		f.log.Debug().Str("image", ref.String()).Err(err).Msg("the image needs credentials: its binary is private")
		return true
	}
	return anon.Digest != digest
}

func (r *Result) add(p Platform, b *binstore.Binary) {
	r.Platforms = append(r.Platforms, p.String())
	r.Binaries = append(r.Binaries, b)
	r.Unsigned = append(r.Unsigned, false)
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
// unless the store serves this very manifest's binary, and whether blobs
// were read. A public pull never reuses a private binary: it pulls the
// bytes and so makes them public.
func (f *Fetcher) fromImage(ctx context.Context, ref name.Reference, image string, img ggcrv1.Image, p Platform, rel string, private bool) (*binstore.Binary, bool, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, false, registryguard.Classify("digest of the "+p.String()+" image", err)
	}
	if b := f.servedFor(p, rel, digest.String(), private); b != nil {
		return b, false, nil
	}
	src := binstore.Source{Image: image, Registry: ref.Context().RegistryStr(), Repository: ref.Context().RepositoryStr(), ManifestDigest: digest.String(), Private: private}
	b, err := f.extract(ctx, img, p, rel, src)
	if err != nil {
		return nil, true, err
	}
	f.log.Info().Str("image", image).Str("platform", p.String()).Str("release", rel).Str("sha256", b.SHA256).
		Int64("size", b.Size).Str("keyId", b.KeyID).Str("manifest", digest.String()).
		Msg("binary from the image verified; served")
	return b, true, nil
}

// commit lands a staged binary once it fits the quotas.
func (f *Fetcher) commit(ctx context.Context, p Platform, rel string, staged *binstore.Staged, c binstore.Candidate) (*binstore.Binary, error) {
	f.quotaMu.Lock()
	defer f.quotaMu.Unlock()
	unit := unitOf(ctx)
	if err := f.admit(unit, p.dir(), rel, staged); err != nil {
		staged.Discard()
		return nil, err
	}
	c.Source.LandedFor = unit
	return staged.Commit(c)
}

// servedFor returns the stored binary known to be the manifest's: other
// images may claim the release with other bytes.
func (f *Fetcher) servedFor(p Platform, rel, manifest string, private bool) *binstore.Binary {
	for _, b := range f.cfg.Store.Current().Claims(p.dir(), rel) {
		if known, _ := b.FromManifest(manifest); known && (private || !b.Private()) {
			return b
		}
	}
	return nil
}

// platformImages picks the image of every served platform.
func (f *Fetcher) platformImages(desc *remote.Descriptor) (map[Platform]ggcrv1.Image, error) {
	out := map[Platform]ggcrv1.Image{}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, registryguard.Classify("read index", err)
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			return nil, registryguard.Classify("read index manifest", err)
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
				return nil, registryguard.Classify("read "+p.String()+" image", err)
			}
			out[p] = img
		}
		return out, nil
	}
	img, err := desc.Image()
	if err != nil {
		return nil, registryguard.Classify("read image", err)
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

// releaseOf reads the release from a "release" or "version" label, or the tag.
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
		return "", reasonf(errInvalidImage, "no release/version label and no release tag")
	}
	return tag, nil
}

func (f *Fetcher) platformNames() []string {
	var out []string
	for _, p := range f.cfg.Platforms {
		out = append(out, p.String())
	}
	return out
}

// maxConfigSize caps an image config: go-containerregistry reads one of
// any size its manifest declares. MinIO's are tens of KiB.
const maxConfigSize = 4 << 20

// configFile reads the image's config, refusing one too large or of
// undeclared size before a byte of it is read.
func configFile(img ggcrv1.Image) (*ggcrv1.ConfigFile, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, registryguard.Classify("read manifest", err)
	}
	if m.Config.Data == nil && (m.Config.Size < 0 || m.Config.Size > maxConfigSize) {
		return nil, reasonf(errImageTooLarge, "the image config %s declares %d bytes; at most %d are read", m.Config.Digest, m.Config.Size, maxConfigSize)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, registryguard.Classify("read image config", err)
	}
	return cfg, nil
}
