package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

func TestKlogLinesBecomeJSON(t *testing.T) {
	var buf bytes.Buffer
	RouteKlog(zerolog.New(&buf).Level(zerolog.InfoLevel))
	defer klog.ClearLogger()

	klog.InfoS("successfully acquired lease", "lease", "ops/object-store-operator")
	klog.ErrorS(errors.New("forbidden"), "Failed to watch", "resource", "objectstores")
	klog.V(4).InfoS("too verbose for info")
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Equal(t, "client-go", first["component"])
	assert.Equal(t, "successfully acquired lease", first["message"])
	assert.Equal(t, "ops/object-store-operator", first["lease"])
	assert.Equal(t, "error", second["level"])
	assert.Equal(t, "forbidden", second["error"])
	assert.Equal(t, "objectstores", second["resource"])
}
