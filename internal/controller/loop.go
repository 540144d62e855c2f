package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// Reconciler is what a controller of ObjectStores implements: its
// decisions, and nothing of the plumbing a Loop owns (queue, cache sync,
// leadership, lookup, backoff, panics). Reconcile is level-based and
// idempotent: it reads the world through listers and writes only the
// difference. store is u converted; u is the object as the informer
// holds it, which status writes apply against. Neither is to be modified.
// ctx is the leadership term's (it ends with the term), or, for a Loop
// that works while following (Options.WhileFollowing), the Loop's.
type Reconciler interface {
	Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (Result, error)
}

// Forgetter is implemented by a Reconciler that keeps something per
// ObjectStore: Forget(key) is called, instead of Reconcile, once the
// ObjectStore is gone from the informer's cache.
type Forgetter interface {
	Forget(key string)
}

// InvalidReporter is implemented by a Reconciler that reports an
// ObjectStore whose object does not convert to *v1.ObjectStore (err
// says why); without it such an object is skipped (another controller
// reports it). Its error is treated as Reconcile's.
type InvalidReporter interface {
	Invalid(ctx context.Context, u *unstructured.Unstructured, err error) error
}

// Result is what a Reconcile asks of the queue besides its error.
type Result struct {
	// RequeueAfter, when positive and Reconcile returned no error, looks
	// at the key again after that long (an update in flight, say). An
	// error requeues with the queue's backoff instead.
	RequeueAfter time.Duration
}

// Options configure a Loop. Zero values mean "off" or "none"; nothing
// here has a default of its own beyond that.
type Options struct {
	// Name names the queue (the workqueue_* metrics' name label), the
	// panic counter's controller label and the log's component.
	Name string
	// ObjectStores is a dynamic informer on v1.Resource.
	ObjectStores cache.SharedIndexInformer
	// Synced are the other informers the Reconciler reads; no key is
	// worked on before they and ObjectStores have synced.
	Synced []cache.InformerSynced
	// Workers is how many keys are reconciled at once (0 counts as 1).
	Workers int
	// RateLimiter spaces out the retries of a failing key (required: how
	// fast to retry is each controller's choice).
	RateLimiter workqueue.TypedRateLimiter[string]
	// Changed tells whether an update event of an ObjectStore queues it;
	// nil: SpecChangedOrResync (status writes, ours included, do not).
	// Adds and deletes always queue.
	Changed func(old, obj *unstructured.Unstructured) bool
	// WhileFollowing makes the Loop reconcile on every replica, the
	// leader's or not, with the Loop's context: for work every replica
	// does (filling its own store). Such a Reconciler writes only while
	// Term().Context() is set. Otherwise keys are reconciled only while
	// leading, with the term's context.
	WhileFollowing bool
	// BeforeTerm, when set, runs when a term starts, before it is taken
	// up: it returns false when ctx ended first. For what must hold before
	// the leader's first write (the serving certificate being loaded).
	BeforeTerm func(ctx context.Context) bool
	// OnTerm, when set, runs once a term is taken up, before every key is
	// queued.
	OnTerm func()
	// ReportPanic, when set, reports a recovered panic on the ObjectStore
	// (its condition, reason ReasonInternalError), while leading, with the
	// term's context. See InternalErrorCondition.
	ReportPanic func(ctx context.Context, u *unstructured.Unstructured, message string)
	// OnError, when set, is told every failure after the panic handling
	// (the controller's own log line); nil: errors are only retried.
	OnError func(key string, err error)
	// Registerer takes the count of recovered panics (nil: not exported).
	Registerer prometheus.Registerer
	Log        zerolog.Logger
}

// Loop runs a Reconciler over every ObjectStore, in the shape of
// kubernetes/sample-controller: event handlers only queue keys, workers
// take them from a rate-limited queue, and each key is reconciled with
// backoff when it fails. It lives as long as the process, on every
// replica; a leadership term (Lead) lets it act. It owns the queue, the
// wait for the caches, the term, queueing every key on a new term, the
// lookup of the key in the cache (a deleted object goes to Forget), panic
// recovery and per-key backoff; the workqueue_* metrics come from the
// provider set once in main.
type Loop struct {
	opts    Options
	r       Reconciler
	log     zerolog.Logger
	stores  cache.Indexer
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	term    Term
	onError func(string, error)
}

// NewLoop wires the ObjectStore event handler; call Run on every replica
// and Lead while leading. A controller adds handlers of its own (a
// referenced Secret changed, a StatefulSet changed) that queue keys with
// Enqueue, EnqueueReferrers over Queue, or Queue().Add.
func NewLoop(opts Options, r Reconciler) (*Loop, error) {
	if opts.ObjectStores == nil || opts.RateLimiter == nil || r == nil {
		return nil, fmt.Errorf("%s: a Loop needs an ObjectStore informer, a rate limiter and a Reconciler", opts.Name)
	}
	changed := opts.Changed
	if changed == nil {
		changed = func(old, obj *unstructured.Unstructured) bool { return SpecChangedOrResync(old, obj) }
	}
	l := &Loop{
		opts:   opts,
		r:      r,
		log:    opts.Log.With().Str("component", opts.Name).Logger(),
		stores: opts.ObjectStores.GetIndexer(),
		synced: append([]cache.InformerSynced{opts.ObjectStores.HasSynced}, opts.Synced...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.Name}),
	}
	l.onError = HandlePanics(PanicCounter(opts.Registerer, opts.Name), l.log, l.reportPanic, opts.OnError)
	if _, err := opts.ObjectStores.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: l.Enqueue,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || changed(o, n) {
				l.Enqueue(obj)
			}
		},
		DeleteFunc: l.Enqueue,
	}); err != nil {
		return nil, fmt.Errorf("%s ObjectStore handler: %w", opts.Name, err)
	}
	return l, nil
}

// Enqueue queues the key of obj, an ObjectStore or its tombstone.
func (l *Loop) Enqueue(obj any) { EnqueueObject(l.queue, obj) }

// Queue is the Loop's queue, for a controller's own sources of keys (a
// pull that ended, an update call that ended, AddAfter).
func (l *Loop) Queue() workqueue.TypedRateLimitingInterface[string] { return l.queue }

// Term is the leadership term: its Context is set while leading.
func (l *Loop) Term() *Term { return &l.term }

// Stores is the ObjectStore informer's cache.
func (l *Loop) Stores() cache.Indexer { return l.stores }

// HasSynced tells whether every informer the Loop waits for has synced.
func (l *Loop) HasSynced() bool {
	for _, s := range l.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run waits for the caches, then works until ctx ends and every
// reconcile in flight has returned.
func (l *Loop) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), l.synced...) {
		return fmt.Errorf("%s: informers did not sync", l.opts.Name)
	}
	Run(ctx, l.queue, l.opts.Workers, l.SyncKey, l.onError)
	return nil
}

// Lead makes the Loop act until ctx (the leadership term) ends: once the
// caches synced and BeforeTerm passed, every key is queued so the new
// leader looks at everything once. A reconcile in flight when the term
// ends is cancelled with it.
func (l *Loop) Lead(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), l.synced...) {
		return
	}
	if l.opts.BeforeTerm != nil && !l.opts.BeforeTerm(ctx) {
		return
	}
	l.term.Lead(ctx, func() {
		if l.opts.OnTerm != nil {
			l.opts.OnTerm()
		}
		l.EnqueueAll()
	})
}

// EnqueueAll queues every ObjectStore in the cache.
func (l *Loop) EnqueueAll() {
	for _, key := range l.stores.ListKeys() {
		l.queue.Add(key)
	}
}

// SyncKey reconciles one key as a worker does (the term check, the
// lookup, Forget, Invalid, RequeueAfter), without the queue's backoff:
// Run's sync, and the tests'.
func (l *Loop) SyncKey(ctx context.Context, key string) error {
	res, err := l.sync(ctx, key)
	if err == nil && res.RequeueAfter > 0 {
		l.queue.AddAfter(key, res.RequeueAfter)
	}
	return err
}

func (l *Loop) sync(ctx context.Context, key string) (Result, error) {
	if !l.opts.WhileFollowing {
		if ctx = l.term.Context(); ctx == nil {
			return Result{}, nil // following: the next term queues every key
		}
	}
	obj, exists, err := l.stores.GetByKey(key)
	if err != nil {
		return Result{}, fmt.Errorf("get ObjectStore %s: %w", key, err)
	}
	if !exists {
		if f, ok := l.r.(Forgetter); ok {
			f.Forget(key)
		}
		return Result{}, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return Result{}, fmt.Errorf("ObjectStore %s: the cache holds a %T", key, obj)
	}
	store, err := v1.FromUnstructured(u)
	if err != nil {
		if inv, ok := l.r.(InvalidReporter); ok {
			return Result{}, inv.Invalid(ctx, u, err)
		}
		return Result{}, nil
	}
	return l.r.Reconcile(ctx, store, u)
}

// reportPanic hands a recovered panic to Options.ReportPanic while
// leading; a follower writes nothing.
func (l *Loop) reportPanic(key, message string) {
	ctx := l.term.Context()
	if ctx == nil || l.opts.ReportPanic == nil {
		return
	}
	obj, exists, err := l.stores.GetByKey(key)
	u, ok := obj.(*unstructured.Unstructured)
	if err != nil || !exists || !ok {
		return
	}
	l.opts.ReportPanic(ctx, u, message)
}
