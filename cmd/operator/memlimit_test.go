package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	v2, v1 := write("memory.max", "536870912\n"), write("limit_in_bytes", "268435456\n")
	limit, from := containerMemoryLimit([]string{v2, v1})
	assert.Equal(t, int64(512<<20), limit)
	assert.Equal(t, v2, from)

	limit, _ = containerMemoryLimit([]string{filepath.Join(dir, "absent"), v1})
	assert.Equal(t, int64(256<<20), limit, "cgroup v1 when v2 is absent")

	for _, unlimited := range []string{"max\n", "9223372036854771712\n"} {
		limit, _ = containerMemoryLimit([]string{write("unlimited", unlimited)})
		assert.Zero(t, limit, "%q is no limit", unlimited)
	}
}

func TestGCFloor(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name            string
		soft, container int64
		want            uint64
	}{
		{"the chart's 512 MiB container", 512 * mib * 9 / 10, 512 * mib, 512 * mib * 9 / 10 / 4},
		{"no soft limit", math.MaxInt64, 512 * mib, 0},
		{"a GOMEMLIMIT above the container is held to the container", 64 << 30, 512 * mib, 512 * mib * 9 / 10 / 4},
		{"a GOMEMLIMIT far above what is wanted is bounded", 64 << 30, 0, maxGCFloor},
		{"a GOMEMLIMIT below the container's", 200 * mib, 512 * mib, 50 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, gcFloor(tt.soft, tt.container)) })
	}
}
