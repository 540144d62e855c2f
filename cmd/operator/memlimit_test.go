package main

import (
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
