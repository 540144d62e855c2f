package upgradeserver

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConnectionsPastTheLimitAreClosedAndSlotsComeBack(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var rejected atomic.Int64
	ln := &limitListener{Listener: inner, shares: newShares(2, 0, 0), clients: noClients{}, rejected: func() { rejected.Add(1) }}
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first := <-accepted
	<-accepted

	third := dial()
	require.NoError(t, third.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = third.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the connection past the limit is closed")
	assert.Equal(t, int64(1), rejected.Load())

	require.NoError(t, first.Close())
	_ = first.Close() // a second Close (net/http may close twice) frees no second slot
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot is used again")
	}
	fourth := dial()
	require.NoError(t, fourth.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = fourth.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "still at most two")
}
