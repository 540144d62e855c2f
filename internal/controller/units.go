package controller

import (
	"context"
	"slices"
	stdsync "sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// unitGate bounds how many keys of one unit (a tenant: its namespace, or
// what the platform says it is) are synced at once. Without it one tenant
// with many ObjectStores takes every worker, and with each the memory its
// sync holds, while the other tenants' keys wait. A key of a unit at its
// bound is parked, not retried: it goes back to the queue when a sync of
// its unit ends, so parked keys cost no worker and no polling.
type unitGate struct {
	max    int
	unitOf func(key string) string
	queue  workqueue.TypedInterface[string]

	mu      stdsync.Mutex
	running map[string]int
	parked  map[string][]string // by unit, in the order they came
}

func newUnitGate(max int, unitOf func(string) string, queue workqueue.TypedInterface[string]) *unitGate {
	if unitOf == nil {
		unitOf = namespaceOf
	}
	return &unitGate{max: max, unitOf: unitOf, queue: queue, running: map[string]int{}, parked: map[string][]string{}}
}

// namespaceOf is the namespace of a namespace/name key.
func namespaceOf(key string) string {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return key
	}
	return ns
}

// wrap runs sync for a key when its unit has room, else parks the key.
func (g *unitGate) wrap(sync func(context.Context, string) error) func(context.Context, string) error {
	return func(ctx context.Context, key string) error {
		unit := g.unitOf(key)
		if !g.enter(unit, key) {
			return nil
		}
		defer g.leave(unit)
		return sync(ctx, key)
	}
}

func (g *unitGate) enter(unit, key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	parked := g.parked[unit]
	if g.running[unit] >= g.max {
		if !slices.Contains(parked, key) {
			g.parked[unit] = append(parked, key)
		}
		return false
	}
	// A parked key queued again by an event runs now: not twice.
	if i := slices.Index(parked, key); i >= 0 {
		g.parked[unit] = slices.Delete(parked, i, i+1)
	}
	g.running[unit]++
	return true
}

// leave frees a place of unit and queues the first key parked there.
func (g *unitGate) leave(unit string) {
	g.mu.Lock()
	g.running[unit]--
	if g.running[unit] == 0 {
		delete(g.running, unit)
	}
	var next string
	if parked := g.parked[unit]; len(parked) > 0 {
		next = parked[0]
		if g.parked[unit] = parked[1:]; len(parked) == 1 {
			delete(g.parked, unit)
		}
	}
	g.mu.Unlock()
	if next != "" {
		g.queue.Add(next)
	}
}
