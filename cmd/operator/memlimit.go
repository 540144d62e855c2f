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

// setMemoryLimit gives the runtime a soft memory limit derived from the
// container's, unless GOMEMLIMIT says otherwise.
func setMemoryLimit(log zerolog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info().Str("GOMEMLIMIT", os.Getenv("GOMEMLIMIT")).Msg("Go memory limit set by GOMEMLIMIT")
		return
	}
	// The container's memory limit: cgroup v2, then v1.
	limit, file := containerMemoryLimit([]string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"})
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

// startGCFloor keeps the collector from starting below a quarter of the
// soft memory limit, when there is one and GOGC does not say otherwise.
// stop restores GOGC's default.
func startGCFloor(log zerolog.Logger) (stop func()) {
	if v := os.Getenv("GOGC"); v != "" {
		log.Info().Str("GOGC", v).Msg("garbage collector pace set by GOGC; no heap floor")
		return func() {}
	}
	limit := debug.SetMemoryLimit(-1) // -1 reads it
	if limit <= 0 || limit == math.MaxInt64 {
		return func() {}
	}
	floor := uint64(limit / gcFloorDivisor)
	t := gcfloor.Start(floor, 100)
	log.Info().Uint64("heapFloorBytes", floor).Int64("goMemoryLimitBytes", limit).
		Msg("garbage collector starts no cycle below a quarter of the Go memory limit (GOGC overrides)")
	return t.Stop
}
