package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name        string
		live, floor uint64
		base, want  int
	}{
		{"a small heap waits for the floor", 6 * mib, 115 * mib, 100, 1816},
		{"half the floor: the floor is twice live, GOGC's own pace", 57 * mib, 114 * mib, 100, 100},
		{"past the floor the base decides", 200 * mib, 115 * mib, 100, 100},
		{"a base above what the floor asks is kept", 50 * mib, 100 * mib, 300, 300},
		{"nothing measured yet", 0, 115 * mib, 100, 100},
		{"a tiny heap is bounded", 1, 115 * mib, 100, maxPercent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Percent(tt.live, tt.floor, tt.base))
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
