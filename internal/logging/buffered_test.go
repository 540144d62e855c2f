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

// blockingWriter holds every Write until release is closed.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	out     testutil.LockedBuffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	return w.out.Write(p)
}

// A request logs while a batch is being written out (a slow stderr pipe):
// its line is appended, not held behind the write, and comes out next, in
// order.
func TestLinesAreAppendedWhileABatchIsWritten(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 2), release: make(chan struct{})}
	w := NewBufferedWriter(out, time.Hour)
	_, _ = w.Write([]byte("first\n"))
	flushed := make(chan struct{})
	go func() { w.Flush(); close(flushed) }()
	<-out.entered // the first batch is being written

	wrote := make(chan struct{})
	go func() { _, _ = w.Write([]byte("second\n")); close(wrote) }()
	select {
	case <-wrote:
	case <-flushed:
		t.Fatal("the batch finished before the line was appended")
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited for the batch being written")
	}
	close(out.release)
	<-flushed
	w.Flush()
	assert.Equal(t, "first\nsecond\n", out.out.String())
}
