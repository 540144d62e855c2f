package testutil

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat: ports handed out
// in one process are distinct, bindable, and outside the range the kernel
// gives outgoing connections and port-0 listeners.
func TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		ports, err := FreePorts(4)
		require.NoError(t, err)
		require.Len(t, ports, 4)
		for _, p := range ports {
			assert.False(t, seen[p], "port %d handed out twice", p)
			seen[p] = true
			assert.Less(t, p, ephemeralLow())
		}
	}
	ports, err := FreePorts(1)
	require.NoError(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	require.NoError(t, err, "the port is free")
	l.Close()
}
