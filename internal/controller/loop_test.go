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

	v1 "github.com/object-store-operator/operator/api/v1"
	optestutil "github.com/object-store-operator/operator/internal/testutil"
)

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

func (r *recorder) Reconcile(ctx context.Context, store *v1.ObjectStore, u *unstructured.Unstructured) (Result, error) {
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
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"image": "minio/aistor:RELEASE.2026-01-10T10-00-00Z"},
	}}
}

func newLoop(t *testing.T, opts Options, r Reconciler, stores ...*unstructured.Unstructured) *Loop {
	t.Helper()
	opts.ObjectStores = optestutil.SyncedInformer()
	opts.Log = zerolog.Nop()
	opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
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

func run(t *testing.T, l *Loop) {
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

func TestALoopActsOnlyWhileLeadingWithTheTermsContextAndLooksAtEveryKeyOnANewTerm(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options{Workers: 2}, r, objectStore("a", "one"), objectStore("b", "two"))
	require.NoError(t, l.SyncKey(t.Context(), "a/one"))
	assert.Empty(t, r.synced, "a follower reconciles nothing")

	run(t, l)
	term, end := context.WithCancel(context.Background())
	led := make(chan struct{})
	go func() {
		l.Lead(term)
		close(led)
	}()
	require.Eventually(t, func() bool { return r.count("a/one") == 1 && r.count("b/two") == 1 }, 5*time.Second, time.Millisecond,
		"a new term queues every key")
	r.mu.Lock()
	ctx := r.ctxs[0]
	r.mu.Unlock()
	end()
	<-led
	select {
	case <-ctx.Done():
	default:
		t.Fatal("a reconcile's context does not end with the term")
	}
	assert.Nil(t, l.Term().Context(), "following again")
}

func TestALoopForgetsADeletedObjectStore(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options{WhileFollowing: true}, r)
	require.NoError(t, l.SyncKey(t.Context(), "a/gone"))
	assert.Equal(t, []string{"a/gone"}, r.forgotten)
	assert.Empty(t, r.synced)
}

func TestALoopHandsAnObjectThatDoesNotConvertToInvalidOrSkipsIt(t *testing.T) {
	bad := objectStore("a", "bad")
	bad.Object["spec"] = map[string]any{"image": 42}
	r := &recorder{}
	l := newLoop(t, Options{WhileFollowing: true}, invalidRecorder{r}, bad)
	require.Error(t, l.SyncKey(t.Context(), "a/bad"), "Invalid's error is Reconcile's")
	assert.Equal(t, []string{"a/bad"}, r.invalid)

	r2 := &recorder{}
	l = newLoop(t, Options{WhileFollowing: true}, r2, bad)
	require.NoError(t, l.SyncKey(t.Context(), "a/bad"), "skipped: another controller reports it")
	assert.Empty(t, r2.synced)
}

func TestALoopThatWorksWhileFollowingReconcilesWithoutATerm(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, Options{WhileFollowing: true}, r, objectStore("a", "one"))
	ctx := t.Context()
	require.NoError(t, l.SyncKey(ctx, "a/one"))
	assert.Equal(t, []context.Context{ctx}, r.ctxs, "the Loop's context")
}

func TestRequeueAfterLooksAtTheKeyAgain(t *testing.T) {
	r := &recorder{result: Result{RequeueAfter: 10 * time.Millisecond}}
	l := newLoop(t, Options{WhileFollowing: true}, r, objectStore("a", "one"))
	run(t, l)
	l.Queue().Add("a/one")
	require.Eventually(t, func() bool { return r.count("a/one") >= 3 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, l.Queue().NumRequeues("a/one"), "a requeue is no failure: no backoff")
}

func TestAPanickingReconcileIsReportedOnItsObjectWhileLeadingAndTheOthersCarryOn(t *testing.T) {
	r := &recorder{panicFor: "a/hostile"}
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var reported []string
	var errs []error
	l := newLoop(t, Options{Registerer: reg,
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
	term, end := context.WithCancel(context.Background())
	defer end()
	go l.Lead(term)
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

func TestANewLoopNeedsItsInformerRateLimiterAndReconciler(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	limiter := workqueue.DefaultTypedControllerRateLimiter[string]()
	_, err := NewLoop(Options{Name: "x", RateLimiter: limiter}, &recorder{})
	assert.Error(t, err)
	_, err = NewLoop(Options{Name: "x", ObjectStores: informer}, &recorder{})
	assert.Error(t, err)
	var nilReconciler Reconciler
	_, err = NewLoop(Options{Name: "x", ObjectStores: informer, RateLimiter: limiter}, nilReconciler)
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
	l := newLoop(t, Options{Registerer: reg,
		ReportPanic: func(context.Context, *unstructured.Unstructured, string) {
			var conditions []string
			_ = conditions[0]
		},
	}, r, objectStore("a", "hostile"), objectStore("b", "other"))
	run(t, l)
	term, end := context.WithCancel(context.Background())
	defer end()
	go l.Lead(term)
	require.Eventually(t, func() bool {
		return r.count("b/other") == 1 && l.Queue().NumRequeues("a/hostile") > 0
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(PanicCounter(reg, "test")))
}
