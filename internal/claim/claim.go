// Package claim keeps two installs of the operator from reconciling the
// same namespaces. Each install keeps one Lease, its claim, in its own
// namespace: the namespaces it watches (or every namespace), renewed by
// its replicas. An install reads every claim; when an older live claim of
// another install overlaps its namespaces it is refused: it does not
// start its controllers (or stops acting, if the overlap appears later)
// and says why until that claim is gone. Age is the claim's creation
// time, which the apiserver sets; a claim that lapsed or whose
// namespaces changed is made again, and so is younger than any install
// that kept running. Liveness is judged by the reader's own clock (a
// claim whose resource version has not changed for Duration is dead), so
// clocks need not agree.
//
// Only an install's claim counts. A tenant that may write Leases in its
// own namespace can forge one there; so a claim names the ServiceAccount
// its install runs as, which must be of the claim's namespace, and counts
// only while a SubjectAccessReview says that ServiceAccount may "claim"
// "namespaceclaims.aistor.min.io" cluster-wide: a grant only a ClusterRole
// Binding gives (the chart's), which no namespace admin can make.
package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	// LeaseName is the claim's name, in the install's namespace.
	LeaseName = "object-store-operator-claim"
	// Label marks claims: kubectl get lease -A -l aistor.min.io/namespace-claim.
	Label = "aistor.min.io/namespace-claim"
	// NamespacesAnnotation holds the claimed namespaces, sorted and
	// comma-separated, or All.
	NamespacesAnnotation = "aistor.min.io/watch-namespaces"
	// InstallAnnotation names the install (its Service) in messages.
	InstallAnnotation = "aistor.min.io/install"
	// UserAnnotation names the user the install runs as
	// (system:serviceaccount:<claim's namespace>:<name>).
	UserAnnotation = "aistor.min.io/service-account"
	// All is the claim of an install that watches every namespace.
	All = "*"

	// The grant that makes a claim an install's: verb Verb on Resource in
	// Group, cluster-wide. Nothing serves this resource; RBAC grants it
	// all the same, and only cluster-scoped bindings grant it everywhere.
	Group    = "aistor.min.io"
	Resource = "namespaceclaims"
	Verb     = "claim"

	serviceAccountPrefix = "system:serviceaccount:"

	// maxClaims bounds what one check reads: there is at most one claim
	// per namespace.
	maxClaims = 10000
	// maxNamespacesShown bounds the namespaces a message lists.
	maxNamespacesShown = 10
)

// Config is what a Keeper needs.
type Config struct {
	Client kubernetes.Interface
	// Namespace is the install's namespace, where its claim lives.
	Namespace string
	// Install names the install in messages (its Service's name).
	Install string
	// Namespaces are the namespaces the install watches; empty: all.
	Namespaces []string
	// Identity is this replica's, recorded as the claim's holder.
	Identity string
	// User is the user the install runs as, recorded in the claim;
	// empty: asked of the apiserver (SelfSubjectReview).
	User string
	// Duration is how long a claim lives without being renewed.
	Duration time.Duration
	// Interval is how often claims are read (and renewed, see ensure)
	// until this install holds its namespaces; while it holds them, every
	// quarter of Duration (heldInterval).
	Interval   time.Duration
	Clock      clock.WithTicker
	Registerer prometheus.Registerer
	Log        zerolog.Logger
}

// Conflict is an older live claim on some of this install's namespaces.
type Conflict struct {
	// Install is the other install, namespace/name.
	Install string
	// Lease is its claim, namespace/name.
	Lease string
	// Shared are the namespaces both watch; nil when one of the two
	// watches every namespace.
	Shared []string
	// Theirs is the other install's claim (All, or its namespaces).
	Theirs string
	ours   string
}

func (c *Conflict) Error() string {
	shared := "every namespace"
	if c.Shared != nil {
		shared = "namespaces " + showNamespaces(c.Shared)
	}
	return fmt.Sprintf("refused: install %s (claim Lease %s, watching %s) claimed %s first; this install (watching %s) reconciles nothing while that claim is live: give each install its own watchNamespaces (OPERATOR_WATCH_NAMESPACES)",
		c.Install, c.Lease, describe(c.Theirs), shared, describe(c.ours))
}

// Keeper keeps this install's claim and reports whether it holds its
// namespaces.
type Keeper struct {
	cfg   Config
	scope string
	log   zerolog.Logger
	held  prometheus.Gauge

	// seen is when each other claim last changed, by this clock.
	seen map[types.UID]observed
	// user is who this install runs as, once known.
	user string
	// granted is whether each other claim's user may claim, as asked
	// last (again after Duration), keyed by namespace and user.
	granted map[string]verdict

	mu       sync.Mutex
	state    state
	changed  chan struct{}
	streak   int
	contests int
	lastErr  string
}

type verdict struct {
	allowed bool
	at      time.Time
}

type observed struct {
	resourceVersion string
	at              time.Time
}

type state struct {
	checked  bool
	held     bool
	conflict *Conflict
	err      error
}

// New returns a Keeper; Run keeps the claim.
func New(cfg Config) (*Keeper, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Identity == "" {
		return nil, errors.New("claim: client, namespace and identity are required")
	}
	if cfg.Duration <= 0 || cfg.Interval <= 0 || cfg.Interval >= cfg.Duration {
		return nil, fmt.Errorf("claim: interval %s must be positive and shorter than the duration %s", cfg.Interval, cfg.Duration)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	scope := All
	if len(cfg.Namespaces) > 0 {
		ns := slices.Clone(cfg.Namespaces)
		slices.Sort(ns)
		scope = strings.Join(slices.Compact(ns), ",")
	}
	k := &Keeper{
		cfg: cfg, scope: scope, seen: map[types.UID]observed{}, granted: map[string]verdict{}, user: cfg.User, changed: make(chan struct{}),
		log: cfg.Log.With().Str("component", "claim").Str("claim", cfg.Namespace+"/"+LeaseName).Logger(),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_namespace_claim_held",
			Help: "1 while this install holds its namespaces and reconciles them; 0 while another install's older claim overlaps them (see /readyz).",
		}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(k.held); err != nil {
			return nil, fmt.Errorf("claim metrics: %w", err)
		}
	}
	return k, nil
}

// Scope is what the claim holds: All or the sorted namespaces.
func (k *Keeper) Scope() string { return k.scope }

// Run renews the claim and reads the others' (every Interval, or
// heldInterval while held) until ctx ends, then releases the claim if this
// replica renewed it last.
func (k *Keeper) Run(ctx context.Context) error {
	defer k.release(ctx)
	t := k.cfg.Clock.NewTicker(k.cfg.Interval)
	defer t.Stop()
	var last time.Time
	for {
		if k.due(last) {
			k.check(ctx)
			last = k.cfg.Clock.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// due reports whether the claims are to be read again, last read at
// last. Until this install holds its namespaces it reads every Interval,
// to start (or take over from an install that stopped) soon. While it
// holds them a quarter of Duration is soon enough: its claim, renewed
// once older than a third of Duration, stays live, and an older claim
// appearing (rare: a slow first write) ends the term within it. Every
// replica reads all the time, so this is what an idle fleet costs the
// apiserver: a list every 2 s was half a request per second per replica.
func (k *Keeper) due(last time.Time) bool {
	if last.IsZero() {
		return true
	}
	held, _ := k.snapshot()
	return !held || k.cfg.Clock.Since(last) >= k.heldInterval()
}

// heldInterval is how often claims are read while this install holds its
// namespaces.
func (k *Keeper) heldInterval() time.Duration { return max(k.cfg.Interval, k.cfg.Duration/4) }

// Ready is nil while this install holds its namespaces.
func (k *Keeper) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.state
	switch {
	case s.conflict != nil:
		return s.conflict
	case s.held:
		return nil
	case s.err != nil:
		return fmt.Errorf("cannot check that no other install claims these namespaces: %w", s.err)
	}
	return errors.New("checking that no other install claims these namespaces")
}

// WaitHeld returns once this install holds its namespaces, or with
// ctx's error.
func (k *Keeper) WaitHeld(ctx context.Context) error {
	for {
		held, changed := k.snapshot()
		if held {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// WhileHeld runs fn whenever this install holds its namespaces, with a
// context that ends when it stops holding them, until ctx ends. fn
// returning on its own while the namespaces are still held ends WhileHeld
// with its error.
func (k *Keeper) WhileHeld(ctx context.Context, fn func(context.Context) error) error {
	for {
		if err := k.WaitHeld(ctx); err != nil {
			return nil
		}
		termCtx, cancel := context.WithCancel(ctx)
		lost := make(chan struct{})
		go func() {
			defer close(lost)
			for {
				held, changed := k.snapshot()
				if !held {
					cancel()
					return
				}
				select {
				case <-termCtx.Done():
					return
				case <-changed:
				}
			}
		}()
		err := fn(termCtx)
		stillHeld := termCtx.Err() == nil
		cancel()
		<-lost
		if ctx.Err() != nil {
			return nil
		}
		if stillHeld {
			return err
		}
	}
}

func (k *Keeper) snapshot() (bool, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state.held, k.changed
}

func (k *Keeper) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Duration/2)
	defer cancel()
	// One list a check: this install's claim is among them.
	claims, err := k.list(ctx)
	if err == nil {
		var own *coordinationv1.Lease
		for i := range claims {
			if claims[i].Namespace == k.cfg.Namespace && claims[i].Name == LeaseName {
				own = &claims[i]
			}
		}
		if own, err = k.ensure(ctx, own); err == nil {
			var c *Conflict
			if c, err = k.conflict(ctx, own, claims); err == nil {
				k.decide(c)
				return
			}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	k.failed(err)
}

// ensure makes sure this install's claim (cur, as just listed; nil when
// there is none) exists, says what it watches and is renewed, and returns
// it.
func (k *Keeper) ensure(ctx context.Context, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := k.cfg.Client.CoordinationV1().Leases(k.cfg.Namespace)
	if cur == nil {
		created, err := k.create(ctx)
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		// Made by another replica a moment ago, or it lost its label.
		if cur, err = leases.Get(ctx, LeaseName, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("get claim %s/%s: %w", k.cfg.Namespace, LeaseName, err)
		}
	}
	user, err := k.whoami(ctx)
	if err != nil {
		return nil, err
	}
	now := k.cfg.Clock.Now()
	reason := ""
	switch {
	case cur.Annotations[UserAnnotation] != user:
		// Made by an older version, or under another ServiceAccount:
		// others would not count it.
		reason = "it names another ServiceAccount (" + cur.Annotations[UserAnnotation] + ")"
	case cur.Annotations[NamespacesAnnotation] != k.scope:
		reason = "the watched namespaces changed from " + describe(cur.Annotations[NamespacesAnnotation])
	case cur.Spec.RenewTime == nil || now.Sub(cur.Spec.RenewTime.Time) > k.cfg.Duration:
		reason = "it lapsed (no replica renewed it)"
	}
	if reason != "" {
		// A new claim is a new age: it does not overtake installs that
		// started while this one's namespaces or liveness differed.
		k.log.Info().Str("reason", reason).Msg("making the namespace claim again")
		uid := cur.UID
		err := leases.Delete(ctx, LeaseName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete claim %s/%s to make it again: %w", k.cfg.Namespace, LeaseName, err)
		}
		return k.create(ctx)
	}
	holder := ""
	if cur.Spec.HolderIdentity != nil {
		holder = *cur.Spec.HolderIdentity
	}
	if holder != "" && now.Sub(cur.Spec.RenewTime.Time) < k.cfg.Duration/3 && cur.Labels[Label] == "true" {
		return cur, nil
	}
	next := cur.DeepCopy()
	k.stamp(next, now)
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[Label] = "true"
	updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return cur, nil // another replica renewed it
	}
	if err != nil {
		return nil, fmt.Errorf("renew claim %s/%s: %w", k.cfg.Namespace, LeaseName, err)
	}
	return updated, nil
}

func (k *Keeper) stamp(l *coordinationv1.Lease, now time.Time) {
	seconds := int32(k.cfg.Duration / time.Second)
	renew := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &k.cfg.Identity
	l.Spec.LeaseDurationSeconds = &seconds
	l.Spec.RenewTime = &renew
}

// whoami returns the user this install runs as, asking the apiserver
// once.
func (k *Keeper) whoami(ctx context.Context) (string, error) {
	if k.user != "" {
		return k.user, nil
	}
	r, err := k.cfg.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the apiserver who this install runs as (SelfSubjectReview), to name it in claim %s/%s: %w", k.cfg.Namespace, LeaseName, err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("ask the apiserver who this install runs as (SelfSubjectReview): no user name, cannot make claim %s/%s", k.cfg.Namespace, LeaseName)
	}
	k.user = r.Status.UserInfo.Username
	return k.user, nil
}

func (k *Keeper) create(ctx context.Context) (*coordinationv1.Lease, error) {
	user, err := k.whoami(ctx)
	if err != nil {
		return nil, err
	}
	now := k.cfg.Clock.Now()
	acquired := metav1.NewMicroTime(now)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: LeaseName, Namespace: k.cfg.Namespace,
			Labels:      map[string]string{Label: "true", "app.kubernetes.io/managed-by": "object-store-operator"},
			Annotations: map[string]string{NamespacesAnnotation: k.scope, InstallAnnotation: k.cfg.Install, UserAnnotation: user},
		},
		Spec: coordinationv1.LeaseSpec{AcquireTime: &acquired},
	}
	k.stamp(l, now)
	created, err := k.cfg.Client.CoordinationV1().Leases(k.cfg.Namespace).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("create claim %s/%s: %w", k.cfg.Namespace, LeaseName, err)
	}
	k.log.Info().Str("namespaces", describe(k.scope)).Msg("namespace claim made")
	return created, nil
}

// list reads every install's claim, in pages.
func (k *Keeper) list(ctx context.Context) ([]coordinationv1.Lease, error) {
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + LeaseName, LabelSelector: Label, Limit: 500}
	var all []coordinationv1.Lease
	for {
		page, err := k.cfg.Client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the installs' claims (Leases %s in every namespace): %w", LeaseName, err)
		}
		all = append(all, page.Items...)
		if len(all) > maxClaims {
			return nil, fmt.Errorf("list the installs' claims: more than %d", maxClaims)
		}
		if page.Continue == "" {
			return all, nil
		}
		opts.Continue = page.Continue
	}
}

// conflict returns the oldest live claim of another install that overlaps
// this one's and is older than own, or nil. A claim counts only once its
// user is found to be its install's (granted); only claims that would
// refuse this install are asked about, oldest first.
func (k *Keeper) conflict(ctx context.Context, own *coordinationv1.Lease, claims []coordinationv1.Lease) (*Conflict, error) {
	now := k.cfg.Clock.Now()
	present := map[types.UID]bool{}
	asked := map[string]bool{}
	var candidates []*coordinationv1.Lease
	for i := range claims {
		c := &claims[i]
		if c.Namespace == k.cfg.Namespace || c.Name != LeaseName || c.Labels[Label] != "true" {
			continue
		}
		present[c.UID] = true
		asked[grantKey(c)] = true
		if !k.live(c, now) {
			continue
		}
		if _, overlap := overlapping(k.scope, c.Annotations[NamespacesAnnotation]); overlap && older(c, own) {
			candidates = append(candidates, c)
		}
	}
	for uid := range k.seen {
		if !present[uid] {
			delete(k.seen, uid)
		}
	}
	for key := range k.granted {
		if !asked[key] {
			delete(k.granted, key)
		}
	}
	slices.SortFunc(candidates, func(a, b *coordinationv1.Lease) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	for _, found := range candidates {
		ok, err := k.grantedTo(ctx, found, now)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		shared, _ := overlapping(k.scope, found.Annotations[NamespacesAnnotation])
		install := found.Annotations[InstallAnnotation]
		if install == "" || len(install) > 253 {
			install = "object-store-operator"
		}
		return &Conflict{
			Install: found.Namespace + "/" + install, Lease: found.Namespace + "/" + found.Name,
			Shared: shared, Theirs: found.Annotations[NamespacesAnnotation], ours: k.scope,
		}, nil
	}
	return nil, nil
}

func grantKey(c *coordinationv1.Lease) string {
	return c.Namespace + "/" + c.Annotations[UserAnnotation]
}

// grantedTo reports whether claim c is an install's: it names a
// ServiceAccount of its own namespace that may claim namespaces
// cluster-wide. A tenant controls the ServiceAccounts, Roles and
// RoleBindings of its namespace, but not a ClusterRoleBinding, and a
// RoleBinding grants nothing cluster-wide. The answer is kept for
// Duration.
func (k *Keeper) grantedTo(ctx context.Context, c *coordinationv1.Lease, now time.Time) (bool, error) {
	key := grantKey(c)
	if v, ok := k.granted[key]; ok && now.Sub(v.at) <= k.cfg.Duration {
		return v.allowed, nil
	}
	user := c.Annotations[UserAnnotation]
	name, ok := strings.CutPrefix(user, serviceAccountPrefix+c.Namespace+":")
	allowed, reason := false, ""
	switch {
	case user == "":
		reason = "it names no ServiceAccount (a forged claim, or an install of an older version)"
	case !ok || name == "" || strings.Contains(name, ":") || len(user) > 512:
		reason = "it names a user that is not a ServiceAccount of its namespace"
	default:
		review, err := k.cfg.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + c.Namespace, "system:authenticated"},
				// No namespace: cluster-wide.
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: Group, Resource: Resource, Verb: Verb},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("check claim %s/%s (SubjectAccessReview: may %s %s %s.%s cluster-wide?): %w",
				c.Namespace, c.Name, user, Verb, Resource, Group, err)
		}
		allowed = review.Status.Allowed
		reason = "its ServiceAccount " + user + " may not " + Verb + " " + Resource + "." + Group + " cluster-wide (no install's ClusterRoleBinding)"
	}
	if _, known := k.granted[key]; !known && !allowed {
		k.log.Warn().Str("object", c.Namespace+"/"+c.Name).Str("reason", reason).
			Msg("ignoring a claim that is not an install's")
	}
	k.granted[key] = verdict{allowed: allowed, at: now}
	return allowed, nil
}

// live reports whether another install renews its claim: released claims
// (no holder) are not; others are while their resource version changed
// within Duration, as this clock sees it. A claim seen for the first time
// counts as renewed now.
func (k *Keeper) live(c *coordinationv1.Lease, now time.Time) bool {
	if c.Spec.HolderIdentity == nil || *c.Spec.HolderIdentity == "" {
		delete(k.seen, c.UID)
		return false
	}
	o, ok := k.seen[c.UID]
	if !ok || o.resourceVersion != c.ResourceVersion {
		o = observed{resourceVersion: c.ResourceVersion, at: now}
		k.seen[c.UID] = o
	}
	return now.Sub(o.at) <= k.cfg.Duration
}

// older orders claims by creation, then by namespace: every install sees
// the same order.
func older(a, b *coordinationv1.Lease) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace < b.Namespace
}

// overlapping returns the namespaces two claims share (nil when both are
// All) and whether they share any. An unreadable claim is taken for All:
// better refused than reconciling twice.
func overlapping(ours, theirs string) ([]string, bool) {
	if theirs == "" {
		theirs = All
	}
	switch {
	case ours == All && theirs == All:
		return nil, true
	case ours == All:
		return sortedSet(strings.Split(theirs, ",")), true
	case theirs == All:
		return sortedSet(strings.Split(ours, ",")), true
	}
	mine := strings.Split(ours, ",")
	var shared []string
	for _, ns := range strings.Split(theirs, ",") {
		if slices.Contains(mine, ns) {
			shared = append(shared, ns)
		}
	}
	shared = sortedSet(shared)
	return shared, len(shared) > 0
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func (k *Keeper) decide(conflict *Conflict) {
	k.mu.Lock()
	defer k.mu.Unlock()
	was := k.state
	k.lastErr = ""
	next := state{checked: true}
	if conflict != nil {
		k.streak = 0
		k.contests++
		next.conflict = conflict
	} else {
		k.streak++
		// Two clean reads an Interval apart before acting at start (two
		// installs starting at once each see the other's claim by the
		// second read), three after a conflict (a sibling replica renews
		// a claim released by a replica that stopped within an Interval).
		need := 2
		if k.contests > 0 {
			need = 3
		}
		next.held = was.held || k.streak >= need
	}
	k.state = next
	switch {
	case next.held && !was.held:
		k.held.Set(1)
		k.log.Info().Str("namespaces", describe(k.scope)).Msg("namespace claim held: this install reconciles its namespaces")
	case conflict != nil && (was.conflict == nil || was.conflict.Lease != conflict.Lease || !slices.Equal(was.conflict.Shared, conflict.Shared)):
		k.held.Set(0)
		k.log.Error().Str("install", conflict.Install).Str("otherClaim", conflict.Lease).Str("namespaces", describe(k.scope)).
			Str("shared", sharedText(conflict)).Str("reason", "NamespacesClaimed").
			Msg("refused: another install claimed these namespaces first; not reconciling until its claim is gone")
	}
	if next.held != was.held || (next.conflict == nil) != (was.conflict == nil) {
		close(k.changed)
		k.changed = make(chan struct{})
	}
}

func (k *Keeper) failed(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.state.checked {
		k.state.err = err
	}
	if msg := err.Error(); msg != k.lastErr {
		k.lastErr = msg
		k.log.Warn().Err(err).Str("reason", "ClaimCheckFailed").Bool("held", k.state.held).
			Msg("could not renew or read the namespace claims; keeping the last answer and retrying")
	}
}

// release gives the claim up when this replica renewed it last: the
// install's other replicas renew it again within an Interval, and a
// stopped install stops blocking others at once.
func (k *Keeper) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	leases := k.cfg.Client.CoordinationV1().Leases(k.cfg.Namespace)
	cur, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != k.cfg.Identity {
		return
	}
	next := cur.DeepCopy()
	empty := ""
	next.Spec.HolderIdentity = &empty
	if _, err := leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		k.log.Warn().Err(err).Msg("could not release the namespace claim; it lapses on its own")
		return
	}
	k.log.Info().Msg("namespace claim released")
}

func describe(scope string) string {
	if scope == All || scope == "" {
		return "every namespace"
	}
	return showNamespaces(strings.Split(scope, ","))
}

func sharedText(c *Conflict) string {
	if c.Shared == nil {
		return "every namespace"
	}
	return showNamespaces(c.Shared)
}

func showNamespaces(ns []string) string {
	if len(ns) > maxNamespacesShown {
		return strings.Join(ns[:maxNamespacesShown], ", ") + fmt.Sprintf(" and %d more", len(ns)-maxNamespacesShown)
	}
	return strings.Join(ns, ", ")
}
