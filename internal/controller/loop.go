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
)

// Reconciler is what a controller of one kind of object implements: its
// decisions, and nothing of the plumbing a Loop owns (queue, cache sync,
// lookup, backoff, panics). Reconcile is level-based and idempotent: it
// reads the world through listers and writes only the difference. obj is
// u converted (Options.Convert); u is the object as the informer holds
// it, which status writes apply against. Neither is to be modified. ctx
// is the Loop's run's: the leadership term's for a controller that needs
// leadership.
type Reconciler[T any] interface {
	Reconcile(ctx context.Context, obj T, u *unstructured.Unstructured) (Result, error)
}

// Forgetter is implemented by a Reconciler that keeps something per
// ObjectStore: Forget(key) is called, instead of Reconcile, once the
// ObjectStore is gone from the informer's cache.
type Forgetter interface {
	Forget(key string)
}

// Finisher is implemented by a Reconciler that changed other objects on
// an ObjectStore's behalf and must put them back once it is gone:
// Finish(ctx, key) is called, instead of Reconcile, once the ObjectStore
// is gone from the informer's cache. Its error is treated as Reconcile's.
type Finisher interface {
	Finish(ctx context.Context, key string) error
}

// InvalidReporter is implemented by a Reconciler that reports an
// object that does not convert (Options.Convert; err says why); without it such an object is skipped (another controller
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

// Options configure a Loop over objects converted to T. Zero values mean
// "off" or "none"; nothing here has a default of its own beyond that.
type Options[T any] struct {
	// Name names the queue (the workqueue_* metrics' name label), the
	// panic counter's controller label and the log's component.
	Name string
	// ObjectStores is a dynamic informer on the reconciled resource.
	ObjectStores cache.SharedIndexInformer
	// Convert turns what the informer holds into a T (required).
	Convert func(*unstructured.Unstructured) (T, error)
	// Synced are the other informers the Reconciler reads; no key is
	// worked on before they and ObjectStores have synced.
	Synced []cache.InformerSynced
	// Workers is how many keys are reconciled at once (0 counts as 1).
	Workers int
	// PerUnit, when positive, is how many keys of one unit are reconciled
	// at once, so one tenant's ObjectStores never hold every worker;
	// UnitOf names a key's unit (nil: its namespace).
	PerUnit int
	UnitOf  func(key string) string
	// RateLimiter spaces out the retries of a failing key (required: how
	// fast to retry is each controller's choice).
	RateLimiter workqueue.TypedRateLimiter[string]
	// Changed tells whether an update event of an ObjectStore queues it;
	// nil: SpecChangedOrResync (status writes, ours included, do not).
	// Adds and deletes always queue.
	Changed func(old, obj *unstructured.Unstructured) bool
	// ReportPanic, when set, reports a recovered panic on the object (its
	// condition, reason ReasonInternalError), with the run's context.
	ReportPanic func(ctx context.Context, u *unstructured.Unstructured, message string)
	// OnError, when set, is told every failure after the panic handling
	// (the controller's own log line); nil: errors are only retried.
	OnError func(key string, err error)
	// Registerer takes the count of recovered panics (nil: not exported).
	Registerer prometheus.Registerer
	Log        zerolog.Logger
}

// Loop runs a Reconciler over every object of an informer, in the shape
// of kubernetes/sample-controller: event handlers only queue keys,
// workers take them from a rate-limited queue, and each key is reconciled
// with backoff when it fails. Its informer, handlers and Queue live as
// long as the process; Run works, on every replica or once per
// leadership term, as the controller declares (Manager). It owns the
// queue, the wait for the caches, queueing every key when a run starts,
// the lookup of the key in the cache (a deleted object goes to Forget),
// panic recovery and per-key backoff; the workqueue_* metrics come from
// the provider set once in main.
type Loop[T any] struct {
	opts   Options[T]
	r      Reconciler[T]
	log    zerolog.Logger
	stores cache.Indexer
	synced []cache.InformerSynced
	queue  *Queue
	panics prometheus.Counter
}

// NewLoop wires the object event handler; call Run to work. A controller
// adds handlers of its own (a referenced Secret changed, a StatefulSet
// changed) that queue keys with Enqueue, EnqueueReferrers over Queue, or
// Queue().Add.
func NewLoop[T any](opts Options[T], r Reconciler[T]) (*Loop[T], error) {
	if opts.ObjectStores == nil || opts.RateLimiter == nil || opts.Convert == nil || r == nil {
		return nil, fmt.Errorf("%s: a Loop needs an informer, a rate limiter, a conversion and a Reconciler", opts.Name)
	}
	changed := opts.Changed
	if changed == nil {
		changed = func(old, obj *unstructured.Unstructured) bool { return SpecChangedOrResync(old, obj) }
	}
	l := &Loop[T]{
		opts:   opts,
		r:      r,
		log:    opts.Log.With().Str("component", opts.Name).Logger(),
		stores: opts.ObjectStores.GetIndexer(),
		synced: append([]cache.InformerSynced{opts.ObjectStores.HasSynced}, opts.Synced...),
		queue:  NewQueue(opts.RateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.Name}),
		panics: PanicCounter(opts.Registerer, opts.Name),
	}
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
		return nil, fmt.Errorf("%s event handler: %w", opts.Name, err)
	}
	return l, nil
}

// Enqueue queues the key of obj, or of its tombstone.
func (l *Loop[T]) Enqueue(obj any) { EnqueueObject(l.queue, obj) }

// Queue is the Loop's queue, for a controller's own sources of keys (a
// pull that ended, an update call that ended, AddAfter).
func (l *Loop[T]) Queue() workqueue.TypedRateLimitingInterface[string] { return l.queue }

// Stores is the informer's cache.
func (l *Loop[T]) Stores() cache.Indexer { return l.stores }

// HasSynced tells whether every informer the Loop waits for has synced.
func (l *Loop[T]) HasSynced() bool {
	for _, s := range l.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run waits for the caches, queues every key (a new leader, or a replica
// that starts, looks at everything once), then works until ctx ends and
// every reconcile in flight has returned. It may run again after it
// returned (the next leadership term).
func (l *Loop[T]) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), l.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: informers did not sync", l.opts.Name)
	}
	l.EnqueueAll()
	report := func(key, message string) { l.reportPanic(ctx, key, message) }
	sync := l.SyncKey
	if l.opts.PerUnit > 0 {
		// One gate per run: what a run parked, the next run's EnqueueAll
		// queues anyway.
		sync = newUnitGate(l.opts.PerUnit, l.opts.UnitOf, l.queue).wrap(sync)
	}
	Run(ctx, l.queue, l.opts.Workers, sync, HandlePanics(l.panics, l.log, report, l.opts.OnError))
	return nil
}

// EnqueueAll queues every object in the cache.
func (l *Loop[T]) EnqueueAll() {
	for _, key := range l.stores.ListKeys() {
		l.queue.Add(key)
	}
}

// SyncKey reconciles one key as a worker does (the lookup, Forget,
// Invalid, RequeueAfter), without the queue's backoff: Run's sync, and
// the tests'.
func (l *Loop[T]) SyncKey(ctx context.Context, key string) error {
	res, err := l.sync(ctx, key)
	if err == nil && res.RequeueAfter > 0 {
		l.queue.AddAfter(key, res.RequeueAfter)
	}
	return err
}

func (l *Loop[T]) sync(ctx context.Context, key string) (Result, error) {
	obj, exists, err := l.stores.GetByKey(key)
	if err != nil {
		return Result{}, fmt.Errorf("get %s: %w", key, err)
	}
	if !exists {
		if f, ok := l.r.(Forgetter); ok {
			f.Forget(key)
		}
		if f, ok := l.r.(Finisher); ok {
			return Result{}, f.Finish(ctx, key)
		}
		return Result{}, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return Result{}, fmt.Errorf("%s: the cache holds a %T", key, obj)
	}
	converted, err := l.opts.Convert(u)
	if err != nil {
		if inv, ok := l.r.(InvalidReporter); ok {
			return Result{}, inv.Invalid(ctx, u, err)
		}
		return Result{}, nil
	}
	return l.r.Reconcile(ctx, converted, u)
}

// reportPanic hands a recovered panic to Options.ReportPanic.
func (l *Loop[T]) reportPanic(ctx context.Context, key, message string) {
	if l.opts.ReportPanic == nil || ctx.Err() != nil {
		return
	}
	obj, exists, err := l.stores.GetByKey(key)
	u, ok := obj.(*unstructured.Unstructured)
	if err != nil || !exists || !ok {
		return
	}
	l.opts.ReportPanic(ctx, u, message)
}
