// Package controller holds the worker loop every controller here shares,
// in the shape of kubernetes/sample-controller: keys from a rate-limited
// queue, one idempotent sync per key, backoff when it fails.
package controller

import (
	"context"
	"errors"
	"maps"
	stdsync "sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Run starts workers that call sync for each queued key until ctx ends,
// then shuts the queue down and returns once every sync in flight has
// returned: nothing of one run overlaps what follows it. A *Queue may be
// run again (a new leadership term): each run takes its current queue and
// leaves a fresh one for the next. A key whose sync fails, or panics (a
// *PanicError, see HandlePanics), is requeued with the queue's rate
// limiter and reported, with the key: to onError, the controller's own log
// line, or when onError is nil to utilruntime's error handlers (the log
// too). A key that syncs is forgotten by the rate limiter.
func Run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int,
	sync func(context.Context, string) error, onError func(key string, err error)) {
	defer utilruntime.HandleCrashWithContext(ctx)
	q, restartable := queue.(*Queue)
	if restartable {
		queue = q.current()
	}
	var wg stdsync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for processNext(ctx, queue, sync, onError) {
			}
		})
	}
	<-ctx.Done()
	if restartable {
		q.detach(queue) // before the shutdown: no key added meanwhile is lost
	}
	queue.ShutDown()
	wg.Wait()
}

func processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string],
	sync func(context.Context, string) error, onError func(string, error)) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if ctx.Err() != nil {
		// The run ended: what is left is drained unsynced (the next run
		// looks at every key again).
		queue.Forget(key)
		return true
	}
	err := Recovering(func() error { return sync(ctx, key) })
	var p *PanicError
	if err != nil && (ctx.Err() == nil || errors.As(err, &p)) {
		if onError != nil {
			// What reports a panic reads the object that caused it, and
			// may panic too: not in this goroutine, which would take the
			// process down with every tenant.
			if perr := Recovering(func() error { onError(key, err); return nil }); perr != nil {
				utilruntime.HandleErrorWithContext(ctx, perr, "reporting a failed sync panicked; retrying with backoff", "key", key)
			}
		} else {
			utilruntime.HandleErrorWithContext(ctx, err, "sync failed; retrying with backoff", "key", key)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// EnqueueObject adds the namespace/name key of obj, a deleted object's
// tombstone included.
func EnqueueObject(queue workqueue.TypedInterface[string], obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	queue.Add(key)
}

// Unwrap returns the object a deletion tombstone stands for, or obj.
func Unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// EnqueueReferrers adds the key of every object that indexer files under
// index for obj's namespace/name: the ObjectStores that reference a Secret,
// say. A change then touches only those objects, never a scan of all.
func EnqueueReferrers(queue workqueue.TypedInterface[string], indexer cache.Indexer, index string, obj any) {
	m, err := meta.Accessor(Unwrap(obj))
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	referrers, err := indexer.ByIndex(index, m.GetNamespace()+"/"+m.GetName())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, r := range referrers {
		EnqueueObject(queue, r)
	}
}

// SpecChangedOrResync tells, for an update event, whether obj's spec
// changed (its generation) or the event is a periodic resync (same
// resource version). Status writes, ours and other controllers', are
// neither: a controller acting on the spec skips them.
func SpecChangedOrResync(old, obj any) bool {
	o, err1 := meta.Accessor(old)
	n, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || o.GetResourceVersion() == n.GetResourceVersion()
}

// TrimForCache is a transform for informers (SetTransform): it drops
// what no controller here reads and what is often the largest part of an
// object: managed fields, and kubectl's last-applied-configuration
// annotation, a second copy of the object.
func TrimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			a = maps.Clone(a)
			delete(a, corev1.LastAppliedConfigAnnotation)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}
