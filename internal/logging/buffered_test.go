package logging

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/internal/testutil"
)

func TestBufferedWriterDeliversEveryLineWholeAndInOrder(t *testing.T) {
	out := &testutil.LockedBuffer{}
	w := NewBufferedWriter(out, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()

	_, err := w.Write([]byte("first\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "first\n" }, time.Second, time.Millisecond, "flushed by the ticker")

	var want strings.Builder
	for i := range 5000 {
		line := strings.Repeat("x", i%50) + "\n"
		want.WriteString(line)
		_, _ = w.Write([]byte(line))
	}
	cancel()
	<-done
	assert.Equal(t, "first\n"+want.String(), out.String(), "large batches and the final flush lose nothing")
}
