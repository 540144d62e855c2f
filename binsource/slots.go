package binsource

import (
	"context"
	"strconv"
	"sync"

	"github.com/object-store-operator/operator/internal/controller"
	"github.com/object-store-operator/operator/internal/fairshare"
)

// pullQueue runs pulls in the slots of a fairshare.Scheduler: a unit holds
// at most perUnit, a registry server perRegistry (so one that hangs cannot
// take every slot), and free slots go to the units in turn. It adds what
// a pull is: shared by its key, resolved before it may start, run on its
// own goroutine, withdrawn by its waiters. A waiting pull holds no
// goroutine, and nothing is kept of one that ended or nobody waits for.
type pullQueue struct {
	slots *fairshare.Scheduler

	mu     sync.Mutex
	pulls  map[string]*queuedPull // by pull key: resolving, waiting or running
	bySlot map[string]*queuedPull // by slot: in line or running
	nextID int
}

type queuedPull struct {
	key, unit string
	slot      string // unique: a pull dropped while it runs leaves its key to a new one

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

func newPullQueue(total, perUnit, perRegistry int) *pullQueue {
	return &pullQueue{
		slots: fairshare.New(fairshare.Options{Total: max(total, 1), PerParty: max(perUnit, 1), PerKey: max(perRegistry, 1)}),
		pulls: map[string]*queuedPull{}, bySlot: map[string]*queuedPull{},
	}
}

// submit asks for the pull key of unit: resolve names the registry keys
// it counts against (on its own goroutine), run pulls, and done gets its
// result. A pull of the same key is shared; one nobody waits for leaves
// the queue, or is stopped if it runs.
func (q *pullQueue) submit(ctx context.Context, unit, key string, resolve func(context.Context) []string,
	run func(context.Context) (*Result, error), done func(*Result, error)) (withdraw func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	id := q.nextID
	p, shared := q.pulls[key]
	if !shared {
		p = &queuedPull{key: key, unit: unit, slot: strconv.Itoa(id), run: run, waiters: map[int]func(*Result, error){}}
		p.ctx, p.cancel = context.WithCancel(ctx)
		q.pulls[key] = p
		q.bySlot[p.slot] = p
		// In line from now; it may start once its registry's name resolved.
		q.slots.Enqueue(fairshare.Holder{Key: p.slot, Party: unit}, false)
		go func() {
			keys := resolve(p.ctx)
			q.mu.Lock()
			defer q.mu.Unlock()
			if p.ctx.Err() != nil {
				q.drop(p)
				return
			}
			p.state = waiting
			q.slots.Ready(p.slot, keys)
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

// drop forgets a pull nobody waits for, stopping it if it runs.
func (q *pullQueue) drop(p *queuedPull) {
	p.cancel()
	if q.pulls[p.key] == p {
		delete(q.pulls, p.key)
	}
	if p.state == running {
		return
	}
	delete(q.bySlot, p.slot)
	q.slots.Unwait(p.slot)
}

// dispatch starts waiting pulls while slots are free.
func (q *pullQueue) dispatch() {
	for {
		slot, ok := q.slots.Next()
		if !ok {
			return
		}
		q.start(q.bySlot[slot])
	}
}

func (q *pullQueue) start(p *queuedPull) {
	p.state = running
	go func() {
		// A panic on a registry's bytes is the tenant's failure, not the process's.
		var res *Result
		err := controller.Recovering(func() (err error) {
			res, err = p.run(p.ctx)
			return err
		})
		q.mu.Lock()
		q.slots.Release(p.slot)
		delete(q.bySlot, p.slot)
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

// stats counts running pulls, and pulls resolving or waiting.
func (q *pullQueue) stats() (runs, queued int) { return q.slots.Len() }
