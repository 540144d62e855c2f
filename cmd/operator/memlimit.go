package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/internal/gcfloor"
)

// memoryLimitRatio of the container's memory limit becomes the Go
// runtime's soft limit: the garbage collector works harder near it instead
// of letting the heap grow to twice what is live, and the rest is left for
// stacks and what the runtime does not count.
const memoryLimitRatio = 0.9

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit gives the runtime a soft memory limit derived from the
// container's, unless GOMEMLIMIT says otherwise.
func setMemoryLimit(log zerolog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info().Str("GOMEMLIMIT", os.Getenv("GOMEMLIMIT")).Msg("Go memory limit set by GOMEMLIMIT")
		return
	}
	limit, file := containerMemoryLimit(cgroupMemoryFiles)
	if limit <= 0 {
		return
	}
	soft := int64(float64(limit) * memoryLimitRatio)
	debug.SetMemoryLimit(soft)
	log.Info().Int64("containerLimitBytes", limit).Int64("goMemoryLimitBytes", soft).Str("from", file).
		Msg("Go memory limit set below the container's")
}

// containerMemoryLimit reads the first limit found; 0 when there is none
// ("max", or v1's page-rounded max int64).
func containerMemoryLimit(files []string) (int64, string) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= 1<<62 {
			return 0, f
		}
		return v, f
	}
	return 0, ""
}

// gcFloorDivisor: a quarter of the soft memory limit is the heap the
// collector lets grow before collecting (115 MiB in the chart's 512 MiB
// container, below its 128 MiB request). A fleet's informers make the live
// heap larger than that, and then the floor changes nothing; an operator
// with a small live heap serving TLS would otherwise collect after every
// few MiB of garbage (see docs/configuration.md#memory).
const gcFloorDivisor = 4

// maxGCFloor bounds the floor whatever the limit: past it, fewer
// collections save nothing measurable, and a GOMEMLIMIT set far above what
// the machine has must not become a heap of that size.
const maxGCFloor = 256 << 20

// gcFloor is the heap floor for a soft memory limit and the container's
// limit (0: none): a quarter of the lower of the soft limit and 90% of the
// container's, at most maxGCFloor; 0 for no floor.
func gcFloor(soft, container int64) uint64 {
	if soft <= 0 || soft == math.MaxInt64 {
		return 0
	}
	if container > 0 {
		soft = min(soft, int64(float64(container)*memoryLimitRatio))
	}
	return uint64(min(soft/gcFloorDivisor, maxGCFloor))
}

// startGCFloor keeps the collector from starting below gcFloor, when there
// is a soft memory limit and GOGC does not say otherwise. stop restores
// GOGC's default.
func startGCFloor(log zerolog.Logger) (stop func()) {
	if v := os.Getenv("GOGC"); v != "" {
		log.Info().Str("GOGC", v).Msg("garbage collector pace set by GOGC; no heap floor")
		return func() {}
	}
	soft := debug.SetMemoryLimit(-1) // -1 reads it
	container, _ := containerMemoryLimit(cgroupMemoryFiles)
	floor := gcFloor(soft, container)
	if floor == 0 {
		return func() {}
	}
	t := gcfloor.Start(floor, 100)
	log.Info().Uint64("heapFloorBytes", floor).Int64("goMemoryLimitBytes", soft).
		Msg("garbage collector starts no cycle below a quarter of the Go memory limit (GOGC overrides)")
	return t.Stop
}
