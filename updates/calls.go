package updates

import (
	"context"
	"sync"

	"github.com/object-store-operator/operator/internal/controller"
)

// calls runs ServerUpdateV2 calls beside the work queue. MinIO answers an
// update call only once every node has the binary, which can take minutes
// (or, from a hostile endpoint, forever up to the update timeout): a call
// must never hold a worker, or a few tenants would stall every other one.
// Each namespace holds at most perNamespace calls at once; a key that
// finds its namespace full is queued again when one of its calls ends.
type calls struct {
	perNamespace int
	enqueue      func(key string)

	mu      sync.Mutex
	running map[string]struct{}   // key -> a call in flight
	results map[string]callResult // key -> the answer no sync has acted on
	inNS    map[string]int        // namespace -> calls in flight
	waiting map[string]map[string]struct{}
}

func newCalls(perNamespace int, enqueue func(string)) *calls {
	return &calls{perNamespace: max(perNamespace, 1), enqueue: enqueue,
		running: map[string]struct{}{}, results: map[string]callResult{},
		inNS: map[string]int{}, waiting: map[string]map[string]struct{}{}}
}

// state is key's call as a sync observes it.
func (c *calls) state(key string) callState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s callState
	_, s.running = c.running[key]
	if r, ok := c.results[key]; ok {
		s.result = &r
	}
	return s
}

// reserve takes one of namespace's call slots for key; false when all are
// taken, and key is queued again when one frees. A reservation is either
// started or released.
func (c *calls) reserve(key, namespace string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inNS[namespace] >= c.perNamespace {
		if c.waiting[namespace] == nil {
			c.waiting[namespace] = map[string]struct{}{}
		}
		c.waiting[namespace][key] = struct{}{}
		return false
	}
	c.inNS[namespace]++
	delete(c.waiting[namespace], key)
	if len(c.waiting[namespace]) == 0 {
		delete(c.waiting, namespace)
	}
	return true
}

// release gives back a reservation that was not started.
func (c *calls) release(namespace string) {
	c.mu.Lock()
	waiting := c.freeLocked(namespace)
	c.mu.Unlock()
	c.wake(waiting)
}

func (c *calls) freeLocked(namespace string) []string {
	if c.inNS[namespace]--; c.inNS[namespace] <= 0 {
		delete(c.inNS, namespace)
	}
	var keys []string
	for k := range c.waiting[namespace] {
		keys = append(keys, k)
	}
	delete(c.waiting, namespace)
	return keys
}

func (c *calls) wake(keys []string) {
	for _, k := range keys {
		c.enqueue(k)
	}
}

// start runs do for key on a reservation of namespace's. ctx is the
// leadership term's: a call of a term that ended leaves no result (the
// next leader follows the update recorded in the status). The key is
// queued when the call ends, and so are those waiting on its namespace.
func (c *calls) start(ctx context.Context, key, namespace string, do func(context.Context) callResult) {
	c.mu.Lock()
	c.running[key] = struct{}{}
	delete(c.results, key)
	c.mu.Unlock()
	go func() {
		// MinIO's answer is parsed here, beside the workers: a panic on it
		// is this tenant's failure, handed to its next sync.
		var r callResult
		if err := controller.Recovering(func() error { r = do(ctx); return nil }); err != nil {
			r = callResult{err: err}
		}
		c.mu.Lock()
		delete(c.running, key)
		if ctx.Err() == nil {
			c.results[key] = r
		}
		waiting := c.freeLocked(namespace)
		c.mu.Unlock()
		c.enqueue(key)
		c.wake(waiting)
	}()
}

// consume drops key's result once a sync acted on it.
func (c *calls) consume(key string) {
	c.mu.Lock()
	delete(c.results, key)
	c.mu.Unlock()
}

// forget drops what is kept of a deleted ObjectStore (a call in flight
// ends by its deadline or the term).
func (c *calls) forget(key, namespace string) {
	c.mu.Lock()
	delete(c.results, key)
	if w := c.waiting[namespace]; w != nil {
		delete(w, key)
		if len(w) == 0 {
			delete(c.waiting, namespace)
		}
	}
	c.mu.Unlock()
}
