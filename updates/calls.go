package updates

import (
	"context"
	"sync"

	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/fairshare"
)

// calls runs ServerUpdateV2 calls beside the work queue. MinIO answers an
// update call only once every node has the binary, which can take minutes
// (or, from a hostile endpoint, forever up to the update timeout): a call
// must never hold a worker, or a few tenants would stall every other one.
// Each unit (units.go: the namespace by default) holds at most perUnit
// calls at once; a key that finds its unit full is queued again when one
// of its calls ends.
type calls struct {
	perUnit int
	enqueue func(key string)
	// slots: a unit's keys refused a slot wait, and are woken (and ask
	// again) when one of the unit's calls ends.
	slots *fairshare.Scheduler

	mu      sync.Mutex
	running map[string]struct{}   // key -> a call in flight
	results map[string]callResult // key -> the answer no sync has acted on
}

func newCalls(perUnit int, enqueue func(string)) *calls {
	perUnit = max(perUnit, 1)
	return &calls{perUnit: perUnit, enqueue: enqueue,
		slots:   fairshare.New(fairshare.Options{PerParty: perUnit, Wake: enqueue}),
		running: map[string]struct{}{}, results: map[string]callResult{}}
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

// reserve takes one of unit's call slots for key; false when all are
// taken, and key is queued again when one frees. A reservation is either
// started or released.
func (c *calls) reserve(key, unit string) bool {
	ok, _ := c.slots.Acquire(fairshare.Holder{Key: key, Party: unit}, nil)
	return ok
}

// release gives back key's reservation that was not started.
func (c *calls) release(key string) { c.slots.Release(key) }

// start runs do for key on its reservation. ctx is the
// leadership term's: a call of a term that ended leaves no result (the
// next leader follows the update recorded in the status). The key is
// queued when the call ends, and so are those waiting on its unit.
func (c *calls) start(ctx context.Context, key string, do func(context.Context) callResult) {
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
		c.mu.Unlock()
		// Freed before key is queued: its next sync may reserve again.
		c.slots.Release(key)
		c.enqueue(key)
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
func (c *calls) forget(key string) {
	c.mu.Lock()
	delete(c.results, key)
	c.mu.Unlock()
	c.slots.Unwait(key)
}
