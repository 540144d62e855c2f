// Package gcfloor keeps the Go garbage collector from collecting a small
// heap over and over. With GOGC=100 the runtime collects each time the heap
// doubles, so a process whose live heap is a few MiB collects after every
// few MiB of garbage: serving TLS, where a new connection allocates about
// 40 KiB, that is dozens of collections a second, and a fifth of the CPU.
// Where the process has a memory limit it may use anyway, a floor lets the
// heap grow to that floor before the first collection of a cycle, and once
// the live heap outgrows it the collector is back to its usual pace.
// (bytedance/gopkg's gctuner does the same; this is its core, without the
// dependency.)
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GC percent a tiny live heap would ask for: the
// floor is what is meant; past this, a heap of a few KiB would make the
// arithmetic, not the floor, decide.
const maxPercent = 100_000

// Percent is the GC percent (GOGC) that puts the next heap goal at floor
// for a live heap of live bytes and roots bytes of goroutine stacks and
// globals, and never below base (GOGC's own value). The runtime's goal is
// live + (live + roots) × percent/100: with a small heap and a large
// percent, every KiB of stack would otherwise add a multiple of itself to
// the goal, and a few hundred idle connections would lift it to the
// memory limit.
func Percent(live, roots, floor uint64, base int) int {
	if live == 0 || floor <= live {
		return base
	}
	p := (floor - live) * 100 / (live + roots)
	if p > maxPercent {
		p = maxPercent
	}
	if int(p) < base {
		return base
	}
	return int(p)
}

// Tuner sets the GC percent after every collection from the live heap it
// found.
type Tuner struct {
	floor uint64
	base  int

	// mu orders Stop after a tune running on the cleanup goroutine.
	mu      sync.Mutex
	stopped bool
	sample  []metrics.Sample
	percent int
}

// Start sets the GC percent now and after every collection until Stop,
// so that the heap goal is at least floor bytes. base is the percent
// below which it never goes (100, GOGC's default).
func Start(floor uint64, base int) *Tuner {
	t := &Tuner{floor: floor, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	t.tune()
	t.arm()
	return t
}

// Stop restores the base percent; collections no longer tune.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(t.base)
	t.percent = t.base
}

// Percent is the GC percent last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// arm registers a cleanup on an object nothing references: it runs once
// the next collection has found it unreachable, that is, after every
// collection (one allocated while a collection marks survives it, so the
// tuning may lag a collection), and arms the next one. The sentinel is
// larger than the allocator's 16-byte tiny objects, which share blocks and
// whose cleanups may never run.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

type sentinel [64]byte

// tune sets the percent for the live heap the last collection found; false
// once stopped.
func (t *Tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	var v [3]uint64
	for i, sm := range t.sample {
		if sm.Value.Kind() == metrics.KindUint64 {
			v[i] = sm.Value.Uint64()
		}
	}
	if p := Percent(v[0], v[1]+v[2], t.floor, t.base); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return true
}
