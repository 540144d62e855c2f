package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
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
