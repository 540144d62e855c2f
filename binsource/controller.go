package binsource

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/binstore"
	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/reason"
	"github.com/object-store-operator/operator/internal/registryguard"
	"github.com/object-store-operator/operator/status"
)

// ControllerConfig configures the controller.
type ControllerConfig struct {
	// Secrets reads pull Secrets from the shared cache (secretcache.Reader):
	// a sync costs no GET while a Secret's resource version stays.
	Secrets       Secrets
	SecretsSynced cache.InformerSynced
	Dynamic       dynamic.Interface
	ObjectStores  cache.SharedIndexInformer
	Fetcher       *Fetcher
	// Leading is the leadership term's context, nil while following:
	// conditions and Events are written only with it.
	Leading func() context.Context
	// Keep newer releases must exist before an unreferenced one goes, and
	// Grace pass (an image that flips back and forth is not pulled again).
	Keep     int
	Grace    time.Duration
	Clock    clock.WithDelayedExecution // default the real clock
	Recorder record.EventRecorder
	// Reasons are Reasons() with their remedies spelled; nil: no remedies.
	Reasons reason.Set
	// URLKey derives a tenant's URL component (component), the same on
	// every replica. Empty: a private binary is not published.
	URLKey    []byte
	UpdateURL string // the upgrade server's, as pods reach it
	// Platforms returns the platforms ("os/arch", sorted) the ObjectStore's
	// pods run on (placement.Source; see ownBinary). No sync runs before
	// PlatformsSynced, so a restart does not flip status.binary to
	// linux/amd64 and back.
	Platforms         func(namespace, name string) []string
	OnPlacementChange func(changed func(key string))
	PlatformsSynced   cache.InformerSynced
	Log               zerolog.Logger
	Workers           int
	SyncsPerTenant    int // syncs of one unit at once (0: Workers)
	// UnitOf names the unit (tenant.Resolver.Unit) an ObjectStore key
	// counts against in every share: syncs, pull slots, store share; nil:
	// its namespace.
	UnitOf     func(key string) string
	Registerer prometheus.Registerer
}

// Secrets reads a shared Secret with its data: not to be modified.
type Secrets interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Controller makes every ObjectStore's release available in this
// process's store. It reconciles on every replica, so every replica serves
// the same verified set; only the leader writes conditions and Events.
type Controller struct {
	cfg    ControllerConfig
	log    zerolog.Logger
	loop   *controller.Loop[*v1.ObjectStore]
	stores cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
	status *status.Writer

	mu       sync.Mutex
	outcomes map[string]outcome  // ObjectStore key -> what its last sync found
	pulls    map[string]*awaited // ObjectStore key -> the pull its syncs wait for
	gc       *collector
	// settled is set once every ObjectStore had an outcome: nothing is
	// removed before (a cold start); after, an ObjectStore without one (a
	// new image still pulling) keeps nobody else's binaries from going.
	settled bool
}

// outcome is what a sync found for one ObjectStore's image, and what the
// collector keeps for it: the release, its own binary (nil until one is
// available), its views' URL paths, and every platform's sha256/release.
type outcome struct {
	image, release string
	binary         *v1.BinaryStatus
	published      []string
	pairs          []string
	condition      metav1.Condition
}

// NewController wires event handlers; call Run to work.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Secrets == nil {
		return nil, errors.New("binsource: no Secrets reader")
	}
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Log.With().Str("component", "binsource").Logger(),
		outcomes: map[string]outcome{},
		pulls:    map[string]*awaited{},
		status:   &status.Writer{Client: cfg.Dynamic, Manager: FieldManager, Recorder: cfg.Recorder, Reasons: cfg.Reasons},
	}
	synced := slices.DeleteFunc([]cache.InformerSynced{cfg.PlatformsSynced, cfg.SecretsSynced}, func(s cache.InformerSynced) bool { return s == nil })
	var err error
	c.loop, err = controller.NewLoop(controller.Options[*v1.ObjectStore]{
		Name: "binsource", ObjectStores: cfg.ObjectStores, Convert: v1.FromUnstructured, Synced: synced, Workers: cfg.Workers, PerUnit: cfg.SyncsPerTenant, UnitOf: cfg.UnitOf,
		// A sync that submits a pull keeps its key's backoff: the failure
		// the pull may end in is the next step.
		RateLimiter: keepWhilePulling{workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute), c.pulling},
		ReportPanic: func(_ context.Context, u *unstructured.Unstructured, message string) {
			if ctx := c.leading(); ctx != nil {
				_, _ = c.status.SetCondition(ctx, u, metav1.Condition{Type: v1.ConditionBinaryAvailable,
					Status: metav1.ConditionFalse, Reason: controller.ReasonInternalError, Message: message})
			}
		},
		Registerer: cfg.Registerer, Log: cfg.Log,
	}, c)
	if err != nil {
		return nil, err
	}
	c.stores, c.queue = c.loop.Stores(), c.loop.Queue()
	c.gc = newCollector(cfg.Fetcher.cfg.Store, cfg.Keep, cfg.Grace, cfg.Clock, c.log, c.wanted)
	if cfg.OnPlacementChange != nil {
		cfg.OnPlacementChange(c.queue.Add)
	}
	return c, nil
}

// NeedLeaderElection is false: every replica fills its own store.
func (c *Controller) NeedLeaderElection() bool { return false }

// Run works until ctx ends; the collector runs beside the loop.
func (c *Controller) Run(ctx context.Context) error {
	go func() { _ = c.gc.Run(ctx) }()
	return c.loop.Run(ctx)
}

// Reporter queues every ObjectStore at the start of each term, so the
// outcomes kept while following are reported without a second pull.
func (c *Controller) Reporter() controller.Runnable {
	return controller.RunnableFunc{Leader: true, Fn: func(context.Context) error {
		c.loop.EnqueueAll()
		return nil
	}}
}

// leading is the leadership term's context, nil while following.
func (c *Controller) leading() context.Context {
	if c.cfg.Leading == nil {
		return nil
	}
	return c.cfg.Leading()
}

// Ready reports whether this replica has its own outcome for every
// ObjectStore whose current spec the leader reported available
// (BinaryAvailable=True for its generation), so a lagging replica never
// answers 404 for what another serves. A release nobody resolved yet does
// not hold readiness: one tenant's hanging registry would otherwise take
// the upgrade port from every tenant.
func (c *Controller) Ready() error {
	if !c.loop.HasSynced() {
		return errors.New("ObjectStores not listed yet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var pending []string
	for _, key := range c.stores.ListKeys() {
		obj, ok, _ := c.stores.GetByKey(key)
		if !ok {
			continue
		}
		u := obj.(*unstructured.Unstructured)
		image := imageOf(u)
		cond, reported := status.Condition(u, v1.ConditionBinaryAvailable)
		leaderServes := reported && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == u.GetGeneration()
		if o, done := c.outcomes[key]; image != "" && (!done || o.image != image) && leaderServes {
			pending = append(pending, key)
		}
	}
	if len(pending) > 0 {
		sort.Strings(pending)
		return fmt.Errorf("binaries of %d ObjectStore(s) the leader serves are not in this replica's store yet (%s)", len(pending), strings.Join(pending[:min(len(pending), 5)], ", "))
	}
	return nil
}

// Forget drops a deleted ObjectStore's outcome, and binaries only it wanted.
func (c *Controller) Forget(key string) {
	if c.forget(key) {
		c.gc.Kick()
	}
}

// Invalid reports an ObjectStore whose object does not convert.
func (c *Controller) Invalid(ctx context.Context, u *unstructured.Unstructured, err error) error {
	image := imageOf(u)
	if image == "" {
		c.forget(u.GetNamespace() + "/" + u.GetName())
		return nil
	}
	return c.fail(ctx, u, image, err)
}

// Reconcile makes the ObjectStore's release available and reports it in
// the BinaryAvailable condition; failures are retried with backoff (a
// registry or Secret may be fixed at any time). It runs on every replica,
// with the Loop's context: a pull outlives a term.
func (c *Controller) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (controller.Result, error) {
	return controller.Result{}, c.reconcile(ctx, store, u)
}

func (c *Controller) reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) error {
	key := store.Namespace + "/" + store.Name
	image := store.Spec.Image
	if image == "" {
		c.forget(key)
		return nil
	}
	var secrets []*corev1.Secret
	for _, ref := range store.Spec.ImagePullSecrets {
		s, err := c.cfg.Secrets.Get(ctx, store.Namespace, ref.Name)
		if apierrors.IsNotFound(err) {
			return c.fail(ctx, u, image, reasonf(errPullSecret, "pull Secret %s not found in namespace %s", ref.Name, store.Namespace))
		}
		if err != nil {
			return fmt.Errorf("get pull Secret %s/%s: %w", store.Namespace, ref.Name, err)
		}
		secrets = append(secrets, s)
	}
	kc, err := newKeychain(secrets)
	if err != nil {
		return c.fail(ctx, u, image, reasonf(errPullSecret, "%v", err))
	}
	res, ended, err := c.pull(ctx, key, u.GetNamespace(), image, kc)
	if !ended {
		return nil // the pull's end queues the key again
	}
	if p := (*controller.PanicError)(nil); errors.As(err, &p) {
		return err // InternalError, with the stack, through the worker's HandlePanics
	}
	if err != nil {
		return c.fail(ctx, u, image, err)
	}
	binaries, published, err := c.publish(store, res.Binaries, res.Unsigned)
	if err != nil {
		return c.fail(ctx, u, image, err)
	}
	var platforms []string
	if c.cfg.Platforms != nil {
		platforms = c.cfg.Platforms(u.GetNamespace(), u.GetName())
	}
	own, err := ownBinary(binaries, platforms, res)
	if err != nil {
		return c.fail(ctx, u, image, err)
	}
	var st *v1.BinaryStatus
	if own != nil {
		st = c.binaryStatus(image, own)
	}
	c.cfg.Fetcher.reference(key, c.unit(key), res.Binaries)
	var pairs []string
	for _, b := range res.Binaries {
		pairs = append(pairs, b.SHA256+"/"+b.Release)
	}
	changed := c.record(key, outcome{image: image, release: res.Release, binary: st, published: published, pairs: pairs, condition: metav1.Condition{
		Type: v1.ConditionBinaryAvailable, Status: metav1.ConditionTrue, Reason: ReasonAvailable, Message: available(res, binaries, platforms, own),
	}})
	if err := c.report(u); err != nil {
		return err
	}
	if changed { // a resync to the same release changes nothing to keep
		c.gc.Kick()
	}
	return nil
}

// binaryStatus names the tenant's own binary by its bytes and its URL.
func (c *Controller) binaryStatus(image string, b *binstore.Binary) *v1.BinaryStatus {
	st := &v1.BinaryStatus{Image: image, Release: b.Release, SHA256: b.SHA256, Platform: b.Platform}
	if c.cfg.UpdateURL != "" {
		st.URL = strings.TrimSuffix(c.cfg.UpdateURL, "/") + "/" + b.URLPath() + binstore.SHA256SumSuffix
	}
	return st
}

// available is the BinaryAvailable message of a release served.
func available(res *Result, binaries []*binstore.Binary, platforms []string, own *binstore.Binary) string {
	var sources []string
	for _, s := range res.Sources {
		if !slices.Contains(sources, s) {
			sources = append(sources, s)
		}
	}
	msg := fmt.Sprintf("minio.%s is served for %s (source: %s; minisign key %s)",
		res.Release, strings.Join(res.Platforms, ", "), strings.Join(sources, "; "), strings.Join(res.KeyIDs, ", "))
	if own != nil && len(platforms) > 0 {
		msg += fmt.Sprintf("; the ObjectStore's pods run on %s, status.binary is %s's", strings.Join(platforms, ", "), own.Platform)
	}
	if slices.ContainsFunc(binaries, func(b *binstore.Binary) bool { return b.Private() && b.Source != nil && b.Source.Private }) {
		msg += "; pulled with the ObjectStore's credentials, so served only at its own URL (status.binary.url)"
	}
	return msg
}

// ownBinary is the binary status.binary names: the image's for the first
// platform the pods run on that it holds (a tenant on several platforms is
// rolled, never updated in place, so any will do). With no platforms
// known, linux/amd64's, else the first.
func ownBinary(binaries []*binstore.Binary, platforms []string, res *Result) (*binstore.Binary, error) {
	if len(binaries) == 0 {
		return nil, nil
	}
	byDir := map[string]*binstore.Binary{}
	for _, b := range binaries {
		if _, ok := byDir[b.Platform]; !ok {
			byDir[b.Platform] = b
		}
	}
	if len(platforms) == 0 {
		if amd := byDir[binstore.PlatformDir("linux", "amd64")]; amd != nil {
			return amd, nil
		}
		return binaries[0], nil
	}
	for _, p := range platforms {
		os, arch, _ := strings.Cut(p, "/")
		if b := byDir[binstore.PlatformDir(os, arch)]; b != nil {
			return b, nil
		}
	}
	return nil, reasonf(errNoPlatform, "the ObjectStore's pods run on %s, and minio.%s has no binary for %s (the image holds %s)",
		strings.Join(platforms, ", "), res.Release, strings.Join(platforms, " nor "), strings.Join(res.Platforms, ", "))
}

// fail records and reports a failure, and returns it for a retry.
func (c *Controller) fail(ctx context.Context, u *unstructured.Unstructured, image string, cause error) error {
	key := u.GetNamespace() + "/" + u.GetName()
	r := reasonOf(cause)
	// The condition carries the reason already; the log has the detail.
	msg := strings.Replace(cause.Error(), r+": ", "", 1)
	if remedy := c.cfg.Reasons.Remedy(r); remedy != "" {
		msg += ". " + remedy
	}
	c.log.Error().Str("objectstore", key).Str("image", image).Str("reason", r).Err(cause).Str("detail", registryguard.Detail(cause)).
		Msg("release not available; nothing added to the store")
	// A failure (a registry outage, say) keeps what the same image resolved
	// to before, so housekeeping does not remove it meanwhile.
	c.mu.Lock()
	var kept outcome
	if before, ok := c.outcomes[key]; ok && before.image == image {
		kept = before
	}
	c.mu.Unlock()
	c.record(key, outcome{image: image, release: kept.release, binary: kept.binary, published: kept.published, condition: metav1.Condition{
		Type: v1.ConditionBinaryAvailable, Status: metav1.ConditionFalse, Reason: r, Message: msg,
	}})
	if err := c.report(u); err != nil {
		return err
	}
	return cause
}

// report writes the recorded outcome while this replica leads.
func (c *Controller) report(u *unstructured.Unstructured) error {
	ctx := c.leading()
	if ctx == nil {
		return nil
	}
	c.mu.Lock()
	o, ok := c.outcomes[u.GetNamespace()+"/"+u.GetName()]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := c.status.SetConditionAndBinary(ctx, u, o.condition, o.binary)
	return err
}

// FieldManager owns the BinaryAvailable condition and status.binary.
const FieldManager = "object-store-operator-binsource"

// record keeps an outcome and reports whether the release wanted changed.
func (c *Controller) record(key string, o outcome) bool {
	c.mu.Lock()
	before, had := c.outcomes[key]
	c.outcomes[key] = o
	c.mu.Unlock()
	sha := func(b *v1.BinaryStatus) string {
		if b == nil {
			return ""
		}
		return b.SHA256
	}
	return !had || before.release != o.release || sha(before.binary) != sha(o.binary)
}

// forget drops an outcome and its pull; it reports whether it wanted a release.
func (c *Controller) forget(key string) bool {
	c.mu.Lock()
	before, had := c.outcomes[key]
	delete(c.outcomes, key)
	p := c.pulls[key]
	delete(c.pulls, key)
	c.mu.Unlock()
	c.cfg.Fetcher.unreference(key)
	if p != nil && p.withdraw != nil {
		p.withdraw()
	}
	return had && before.release != ""
}

// wanted is what the ObjectStores want kept, for the collector. It is not
// known (false) until every ObjectStore with an image has been resolved
// once, so a restart removes nothing before it looked at every tenant.
func (c *Controller) wanted() (wanted, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := wanted{releases: map[string]bool{}, pairs: map[string]bool{}, published: map[string]bool{}}
	for _, key := range c.stores.ListKeys() {
		obj, ok, _ := c.stores.GetByKey(key)
		if !ok || imageOf(obj.(*unstructured.Unstructured)) == "" {
			continue
		}
		o, resolved := c.outcomes[key]
		if !resolved && !c.settled {
			return wanted{}, false
		}
		if !resolved {
			continue
		}
		w.releases[o.release] = true
		if o.binary != nil {
			w.pairs[o.binary.SHA256+"/"+o.release] = true
		}
		for _, p := range o.pairs {
			w.pairs[p] = true
		}
		for _, p := range o.published {
			w.published[p] = true
		}
	}
	c.settled = true
	return w, true
}

func imageOf(u *unstructured.Unstructured) string {
	image, _, _ := unstructured.NestedString(u.Object, "spec", "image")
	return image
}

// publish gives the ObjectStore its own view (binstore.Store.Publish) of
// every private binary and of every binary its image shipped unsigned, and
// returns the binaries it is served (the views in their place) and the
// views' URL paths.
func (c *Controller) publish(store *v1.ObjectStore, binaries []*binstore.Binary, unsigned []bool) ([]*binstore.Binary, []string, error) {
	out := make([]*binstore.Binary, 0, len(binaries))
	var published []string
	st := c.cfg.Fetcher.cfg.Store
	for i, b := range binaries {
		// A signature made for another tenant or image is never served at
		// this one's URL.
		sign := i < len(unsigned) && unsigned[i] && st.Signs()
		if !b.Private() && !sign {
			out = append(out, b)
			continue
		}
		if len(c.cfg.URLKey) == 0 {
			return nil, nil, reasonf(errPull, "minio.%s needs a URL of the ObjectStore's own, and this operator has no URL key", b.Release)
		}
		src := binstore.Source{}
		if b.Source != nil {
			src = *b.Source
		}
		src.ObjectStore = store.Namespace + "/" + store.Name
		own, err := st.Publish(b, component(c.cfg.URLKey, b.SHA256, string(store.UID)), src, sign)
		if err != nil {
			return nil, nil, reasonf(errPull, "publish minio.%s for %s/%s: %v", b.Release, store.Namespace, store.Name, err)
		}
		out = append(out, own)
		published = append(published, own.URLPath())
	}
	return out, published, nil
}

// component is the part of a view's URL only its ObjectStore is given:
// an HMAC of the digest and UID under the replicas' shared key, so nothing
// public derives it, a recreated ObjectStore has its own, and every
// replica derives the same.
func component(key []byte, digest, uid string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("object-store-operator binary URL v1\x00" + digest + "\x00" + uid))
	return hex.EncodeToString(mac.Sum(nil))
}

// awaited is a pull an ObjectStore's sync submitted, and its result.
type awaited struct {
	image, credentials string
	withdraw           func()
	done               bool
	res                *Result
	err                error
}

// unit names the unit the ObjectStore key counts against.
func (c *Controller) unit(key string) string {
	if c.cfg.UnitOf != nil {
		return c.cfg.UnitOf(key)
	}
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// pull returns the result of the pull of image with kc once it ended;
// until then it submits the pull (once), and the pull's end queues the key
// again. A sync never waits for a registry: one that never answers would
// hold a worker from every other tenant. A pull no longer wanted (image or
// pull Secrets changed) is withdrawn.
func (c *Controller) pull(ctx context.Context, key, ns, image string, kc *keychain) (res *Result, ended bool, err error) {
	c.mu.Lock()
	p, ok := c.pulls[key]
	if ok && p.image == image && p.credentials == kc.id {
		res, ended, err = p.res, p.done, p.err
		if ended {
			delete(c.pulls, key)
		}
		c.mu.Unlock()
		return res, ended, err
	}
	next := &awaited{image: image, credentials: kc.id}
	c.pulls[key] = next
	c.mu.Unlock()
	if ok && p.withdraw != nil {
		p.withdraw()
	}
	withdraw := c.cfg.Fetcher.Submit(ctx, ns, c.unit(key), image, kc, func(res *Result, err error) {
		c.mu.Lock()
		if c.pulls[key] == next {
			next.done, next.res, next.err = true, res, err
		}
		c.mu.Unlock()
		c.queue.Add(key)
	})
	c.mu.Lock()
	next.withdraw = withdraw
	c.mu.Unlock()
	return nil, false, nil
}

func (c *Controller) pulling(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pulls[key]
	return ok
}

// keepWhilePulling leaves a key's backoff alone while its pull is in
// flight: the sync that submitted it succeeded only in submitting.
type keepWhilePulling struct {
	workqueue.TypedRateLimiter[string]
	pulling func(string) bool
}

func (k keepWhilePulling) Forget(key string) {
	if !k.pulling(key) {
		k.TypedRateLimiter.Forget(key)
	}
}
