package binsource

import (
	"context"
	"slices"
	"sync"

	"github.com/object-store-operator/operator/internal/controller"
)

// pullQueue runs pulls in a fixed number of slots, shared so that one
// tenant can hurt only itself:
//
//   - a namespace holds at most perNamespace slots at once;
//   - the server behind a registry (registryKey: the one address of its
//     name the pull dials) holds at most perRegistry, so a registry that
//     hangs cannot take every slot even when many namespaces use it;
//   - a free slot goes to the namespaces with waiting pulls in turn
//     (round-robin), so a namespace with a thousand waiting pulls makes
//     one with a single pull wait for at most one of them per slot.
//
// Waiting pulls hold no goroutine and no worker: the controller's workers
// submit and return, and a pull's end requeues whoever waits for it.
// Everything it keeps is per pull waited for or running, dropped when the
// pull ends or nobody waits for it any more.
type pullQueue struct {
	total, perNamespace, perRegistry int

	mu      sync.Mutex
	running int
	byNS    map[string]int           // running pulls per namespace
	byKey   map[string]int           // running pulls per registry key
	waiting map[string][]*queuedPull // per namespace, in submission order
	turns   []string                 // namespaces with waiting pulls; the first is served next
	pulls   map[string]*queuedPull   // by pull key: resolving, waiting or running
	nextID  int
}

type queuedPull struct {
	key, ns string
	keys    []string // registry keys; nil while resolving
	ctx     context.Context
	cancel  context.CancelFunc
	run     func(context.Context) (*Result, error)
	waiters map[int]func(*Result, error)
	state   pullState
}

type pullState int

const (
	resolving pullState = iota
	waiting
	running
)

func newPullQueue(total, perNamespace, perRegistry int) *pullQueue {
	return &pullQueue{
		total: max(total, 1), perNamespace: max(perNamespace, 1), perRegistry: max(perRegistry, 1),
		byNS: map[string]int{}, byKey: map[string]int{}, waiting: map[string][]*queuedPull{}, pulls: map[string]*queuedPull{},
	}
}

// submit asks for the pull key of namespace ns: resolve names the
// registry keys it counts against (it may take a while and runs on its
// own goroutine), run pulls. done is called once with run's result, from
// the goroutine that ran it. A pull of the same key already waiting or
// running is shared, not repeated. withdraw takes done back; a pull nobody
// waits for any more leaves the queue, or is stopped if it runs.
func (q *pullQueue) submit(ctx context.Context, ns, key string, resolve func(context.Context) []string,
	run func(context.Context) (*Result, error), done func(*Result, error)) (withdraw func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	id := q.nextID
	p, shared := q.pulls[key]
	if !shared {
		p = &queuedPull{key: key, ns: ns, run: run, waiters: map[int]func(*Result, error){}}
		p.ctx, p.cancel = context.WithCancel(ctx)
		q.pulls[key] = p
		// In line from now, so the order is the submissions'; it waits
		// for its registry's name to resolve before it can start.
		if len(q.waiting[ns]) == 0 {
			q.turns = append(q.turns, ns)
		}
		q.waiting[ns] = append(q.waiting[ns], p)
		go func() {
			keys := resolve(p.ctx)
			q.mu.Lock()
			defer q.mu.Unlock()
			if p.ctx.Err() != nil {
				q.drop(p)
				return
			}
			p.keys, p.state = keys, waiting
			q.dispatch()
		}()
	}
	p.waiters[id] = done
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(p.waiters, id)
		if len(p.waiters) == 0 {
			q.drop(p)
		}
	}
}

// drop forgets a pull nobody waits for: out of the queue if it waits,
// stopped if it runs (its end then delivers to nobody).
func (q *pullQueue) drop(p *queuedPull) {
	p.cancel()
	if q.pulls[p.key] == p {
		delete(q.pulls, p.key)
	}
	if p.state == running {
		return
	}
	w := q.waiting[p.ns]
	if i := slices.Index(w, p); i >= 0 {
		w = slices.Delete(w, i, i+1)
	}
	q.setWaiting(p.ns, w)
}

// setWaiting records a namespace's waiting pulls, taking it out of the
// turns when none are left.
func (q *pullQueue) setWaiting(ns string, w []*queuedPull) {
	if len(w) > 0 {
		q.waiting[ns] = w
		return
	}
	delete(q.waiting, ns)
	if i := slices.Index(q.turns, ns); i >= 0 {
		q.turns = slices.Delete(q.turns, i, i+1)
	}
}

// dispatch starts waiting pulls while slots are free: the first namespace
// in turn that is under its share and has a pull whose registry is under
// its share starts its oldest such pull and goes to the back of the turns.
func (q *pullQueue) dispatch() {
	for q.running < q.total {
		started := false
		for i, ns := range q.turns {
			if q.byNS[ns] >= q.perNamespace {
				continue
			}
			w := q.waiting[ns]
			j := slices.IndexFunc(w, q.startable)
			if j < 0 {
				continue
			}
			p := w[j]
			w = slices.Delete(w, j, j+1)
			q.turns = append(slices.Delete(q.turns, i, i+1), ns)
			q.setWaiting(ns, w)
			q.start(p)
			started = true
			break
		}
		if !started {
			return
		}
	}
}

// startable reports whether p knows its registry, and that registry is
// under its share.
func (q *pullQueue) startable(p *queuedPull) bool {
	if p.state != waiting {
		return false
	}
	for _, k := range p.keys {
		if q.byKey[k] >= q.perRegistry {
			return false
		}
	}
	return true
}

func (q *pullQueue) start(p *queuedPull) {
	p.state = running
	q.running++
	q.byNS[p.ns]++
	for _, k := range p.keys {
		q.byKey[k]++
	}
	go func() {
		// A registry's bytes are parsed here, beside the workers: a panic on
		// them is the pulling tenant's failure, not the process's.
		var res *Result
		err := controller.Recovering(func() (err error) {
			res, err = p.run(p.ctx)
			return err
		})
		q.mu.Lock()
		q.running--
		decrement(q.byNS, p.ns)
		for _, k := range p.keys {
			decrement(q.byKey, k)
		}
		if q.pulls[p.key] == p {
			delete(q.pulls, p.key)
		}
		waiters := p.waiters
		p.waiters = nil
		p.cancel()
		q.dispatch()
		q.mu.Unlock()
		for _, done := range waiters {
			done(res, err)
		}
	}()
}

// decrement lowers a count, forgetting it at zero: the maps hold only
// what runs.
func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// stats is what the queue holds: running pulls, and pulls resolving or
// waiting for a slot.
func (q *pullQueue) stats() (runs, queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.pulls {
		if p.state != running {
			queued++
		}
	}
	return q.running, queued
}
