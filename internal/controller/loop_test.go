package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	optestutil "github.com/object-store-operator/operator/internal/testutil"
)

// object is what the test Loops reconcile: an unstructured object whose
// spec.image is a string converts, any other does not.
type object struct{ Namespace, Name, Image string }

func convert(u *unstructured.Unstructured) (*object, error) {
	image, _, err := unstructured.NestedString(u.Object, "spec", "image")
	if err != nil {
		return nil, err
	}
	return &object{Namespace: u.GetNamespace(), Name: u.GetName(), Image: image}, nil
}

// recorder is a Reconciler that records what it was given.
type recorder struct {
	mu        sync.Mutex
	synced    []string
	ctxs      []context.Context
	forgotten []string
	invalid   []string
	result    Result
	panicFor  string
}

func (r *recorder) Reconcile(ctx context.Context, store *object, u *unstructured.Unstructured) (Result, error) {
	key := store.Namespace + "/" + store.Name
	if key == r.panicFor {
		var nodes []string
		_ = nodes[0]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced = append(r.synced, key)
	r.ctxs = append(r.ctxs, ctx)
	return r.result, nil
}

func (r *recorder) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgotten = append(r.forgotten, key)
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.synced {
		if k == key {
			n++
		}
	}
	return n
}

// invalidRecorder also reports objects that do not convert.
type invalidRecorder struct{ *recorder }

func (r invalidRecorder) Invalid(_ context.Context, u *unstructured.Unstructured, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invalid = append(r.invalid, u.GetNamespace()+"/"+u.GetName())
	return err
}

func objectStore(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "aistor.min.io/v1", "kind": "ObjectStore",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"image": "minio/aistor:RELEASE.2026-01-10T10-00-00Z"},
	}}
}

func newLoop(t *testing.T, opts Options[*object], r Reconciler[*object], stores ...*unstructured.Unstructured) *Loop[*object] {
	t.Helper()
	opts.ObjectStores = optestutil.SyncedInformer()
	opts.Convert = convert
	opts.Log = zerolog.Nop()
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	if opts.Name == "" {
		opts.Name = "test"
	}
	l, err := NewLoop(opts, r)
	require.NoError(t, err)
	for _, u := range stores {
		require.NoError(t, opts.ObjectStores.GetIndexer().Add(u))
	}
	return l
}

// run runs l as the Manager does for one term (or for the process),
// until the test ends.
func run(t *testing.T, l *Loop[*object]) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, l.Run(ctx))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestARunLooksAtEveryKeyWithItsContextAndARunAfterItAgain(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options[*object]{Workers: 2}, r, objectStore("a", "one"), objectStore("b", "two"))
	for term := 1; term <= 2; term++ {
		ctx, end := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			assert.NoError(t, l.Run(ctx))
		}()
		require.Eventually(t, func() bool { return r.count("a/one") == term && r.count("b/two") == term }, 5*time.Second, time.Millisecond,
			"run %d queues every key", term)
		r.mu.Lock()
		got := r.ctxs[len(r.ctxs)-1]
		r.mu.Unlock()
		end()
		<-done
		select {
		case <-got.Done():
		default:
			t.Fatal("a reconcile's context does not end with the run")
		}
		l.Queue().Add("a/one") // between runs: kept for the next
		assert.Equal(t, 1, l.Queue().Len())
	}
}

func TestALoopForgetsADeletedObjectStore(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options[*object]{}, r)
	require.NoError(t, l.SyncKey(t.Context(), "a/gone"))
	assert.Equal(t, []string{"a/gone"}, r.forgotten)
	assert.Empty(t, r.synced)
}

func TestALoopHandsAnObjectThatDoesNotConvertToInvalidOrSkipsIt(t *testing.T) {
	bad := objectStore("a", "bad")
	bad.Object["spec"] = map[string]any{"image": 42}
	r := &recorder{}
	l := newLoop(t, Options[*object]{}, invalidRecorder{r}, bad)
	require.Error(t, l.SyncKey(t.Context(), "a/bad"), "Invalid's error is Reconcile's")
	assert.Equal(t, []string{"a/bad"}, r.invalid)

	r2 := &recorder{}
	l = newLoop(t, Options[*object]{}, r2, bad)
	require.NoError(t, l.SyncKey(t.Context(), "a/bad"), "skipped: another controller reports it")
	assert.Empty(t, r2.synced)
}

func TestASyncReconcilesWithItsContext(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options[*object]{}, r, objectStore("a", "one"))
	ctx := t.Context()
	require.NoError(t, l.SyncKey(ctx, "a/one"))
	assert.Equal(t, []context.Context{ctx}, r.ctxs, "the run's context")
}

func TestRequeueAfterLooksAtTheKeyAgain(t *testing.T) {
	r := &recorder{result: Result{RequeueAfter: 10 * time.Millisecond}}
	l := newLoop(t, Options[*object]{}, r, objectStore("a", "one"))
	run(t, l)
	l.Queue().Add("a/one")
	require.Eventually(t, func() bool { return r.count("a/one") >= 3 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, l.Queue().NumRequeues("a/one"), "a requeue is no failure: no backoff")
}

func TestAPanickingReconcileIsReportedOnItsObjectAndTheOthersCarryOn(t *testing.T) {
	r := &recorder{panicFor: "a/hostile"}
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var reported []string
	var errs []error
	// A backoff longer than the test: the panicking key is retried once
	// the test has read what its first panic left (a 5 ms backoff panicked
	// it again before the counter was read, one run in a few).
	l := newLoop(t, Options[*object]{Registerer: reg,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Minute, time.Minute),
		ReportPanic: func(ctx context.Context, u *unstructured.Unstructured, message string) {
			mu.Lock()
			defer mu.Unlock()
			assert.NotNil(t, ctx)
			reported = append(reported, u.GetName()+": "+message)
		},
		OnError: func(key string, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		},
	}, r, objectStore("a", "hostile"), objectStore("b", "other"))
	run(t, l)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return r.count("b/other") == 1 && len(reported) == 1
	}, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, reported[0], "hostile: the operator failed on this object (runtime error: index out of range")
	var p *PanicError
	require.ErrorAs(t, errs[0], &p, "OnError is told")
	assert.Equal(t, 1.0, testutil.ToFloat64(PanicCounter(reg, "test")))
	assert.Positive(t, l.Queue().NumRequeues("a/hostile"), "retried with backoff")
}

func TestANewLoopNeedsItsInformerRateLimiterConversionAndReconciler(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	limiter := workqueue.DefaultTypedControllerRateLimiter[string]()
	_, err := NewLoop(Options[*object]{Name: "x", RateLimiter: limiter, Convert: convert}, &recorder{})
	assert.Error(t, err)
	_, err = NewLoop(Options[*object]{Name: "x", ObjectStores: informer, Convert: convert}, &recorder{})
	assert.Error(t, err)
	_, err = NewLoop(Options[*object]{Name: "x", ObjectStores: informer, RateLimiter: limiter}, &recorder{})
	assert.Error(t, err, "and its conversion")
	var nilReconciler Reconciler[*object]
	_, err = NewLoop(Options[*object]{Name: "x", ObjectStores: informer, RateLimiter: limiter, Convert: convert}, nilReconciler)
	assert.Error(t, err)
}

// TestAPanicReportingAPanicDoesNotTakeTheProcessDown: the report of a
// panic reads the same object that made the sync panic, and can panic
// too. It ran outside the recovery, in the worker's goroutine: the
// process died, every tenant with it. The key is retried with backoff
// and the other keys carry on.
func TestAPanicReportingAPanicDoesNotTakeTheProcessDown(t *testing.T) {
	r := &recorder{panicFor: "a/hostile"}
	reg := prometheus.NewRegistry()
	l := newLoop(t, Options[*object]{Registerer: reg,
		// Retried after the test has read the counter (see above).
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Minute, time.Minute),
		ReportPanic: func(context.Context, *unstructured.Unstructured, string) {
			var conditions []string
			_ = conditions[0]
		},
	}, r, objectStore("a", "hostile"), objectStore("b", "other"))
	run(t, l)
	require.Eventually(t, func() bool {
		return r.count("b/other") == 1 && l.Queue().NumRequeues("a/hostile") > 0
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(PanicCounter(reg, "test")))
}
