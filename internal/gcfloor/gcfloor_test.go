package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name        string
		live, roots uint64
		floor       uint64
		base, want  int
	}{
		{"a small heap waits for the floor", 6 * mib, 0, 115 * mib, 100, 1816},
		{"stacks and globals count toward the goal", 6 * mib, 6 * mib, 115 * mib, 100, 908},
		{"half the floor: the floor is twice live, GOGC's own pace", 57 * mib, 0, 114 * mib, 100, 100},
		{"past the floor the base decides", 200 * mib, 0, 115 * mib, 100, 100},
		{"a base above what the floor asks is kept", 50 * mib, 0, 100 * mib, 300, 300},
		{"nothing measured yet", 0, 0, 115 * mib, 100, 100},
		{"a tiny heap is bounded", 1, 0, 115 * mib, 100, maxPercent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Percent(tt.live, tt.roots, tt.floor, tt.base))
		})
	}
}

// TestTheHeapGoalReachesTheFloorAfterACollection is what a user sees: with
// the tuner running, the runtime's own heap goal is at the floor after
// collections, and back at GOGC's once stopped.
func TestTheHeapGoalReachesTheFloorAfterACollection(t *testing.T) {
	const floor = 256 << 20
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	tuner := Start(floor, 100)
	goal := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	require.Eventually(t, func() bool {
		runtime.GC()
		return goal() >= floor*9/10
	}, 5*time.Second, 10*time.Millisecond, "heap goal %d, percent %d", goal(), tuner.Percent())
	assert.Greater(t, tuner.Percent(), 100)

	tuner.Stop()
	runtime.GC()
	assert.Less(t, goal(), uint64(floor/4), "stopped: the goal follows GOGC=100 again")
	assert.Equal(t, 100, tuner.Percent())
}

func deep(n int, ready *sync.WaitGroup, release <-chan struct{}) byte {
	var pad [1024]byte
	if n == 0 {
		ready.Done()
		<-release
		return pad[0]
	}
	return deep(n-1, ready, release) + pad[n%1024]
}

// Each connection to the upgrade server is a goroutine with a stack: a
// client holding a few hundred idle ones must not lift the heap goal from
// the floor to the memory limit.
func TestTheHeapGoalStaysNearTheFloorWithGoroutineStacks(t *testing.T) {
	const floor = 64 << 20
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	var ready sync.WaitGroup
	release := make(chan struct{})
	for range 256 { // about 8 MiB of stacks
		ready.Add(1)
		go deep(32, &ready, release)
	}
	ready.Wait()
	t.Cleanup(func() { close(release) })
	tuner := Start(floor, 100)
	t.Cleanup(tuner.Stop)
	for range 6 {
		runtime.GC()
		runtime.Gosched()
	}
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	assert.LessOrEqual(t, s[0].Value.Uint64(), uint64(floor*5/4), "percent %d", tuner.Percent())
}
