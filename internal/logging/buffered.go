package logging

import (
	"context"
	"io"
	"sync"
	"time"
)

// BufferedWriter batches whole log lines and writes them out every
// interval, when a batch reaches maxBatch, and on Flush. It is for the
// access log: one write per request costs a fifth of the upgrade
// server's throughput on the listing, a batch per 100 ms costs nothing
// measurable. zerolog writes each line with one Write call, so lines are
// never split.
type BufferedWriter struct {
	out      io.Writer
	interval time.Duration
	maxBatch int

	// mu guards buf, which writers append to; it is held only to append or
	// to swap the batch out, never during the write to out, so a request
	// logging while a batch is written does not wait for it.
	mu  sync.Mutex
	buf []byte
	// flushMu orders batches: one is written at a time, in the order
	// they were taken. spare is the buffer the last batch was written
	// from, reused for the next.
	flushMu sync.Mutex
	spare   []byte
}

// NewBufferedWriter writes batches to out. Call Run to flush periodically.
func NewBufferedWriter(out io.Writer, interval time.Duration) *BufferedWriter {
	return &BufferedWriter{out: out, interval: interval, maxBatch: 64 << 10}
}

// Write appends one line to the batch.
func (b *BufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= b.maxBatch
	b.mu.Unlock()
	if full {
		b.Flush()
	}
	return len(p), nil
}

// Flush writes out what is batched.
func (b *BufferedWriter) Flush() {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	batch := b.buf
	b.buf = b.spare[:0]
	b.mu.Unlock()
	if len(batch) > 0 {
		// A failing stderr has nowhere to report to.
		_, _ = b.out.Write(batch)
	}
	b.spare = batch[:0]
}

// Run flushes every interval until ctx ends, then flushes a last time.
func (b *BufferedWriter) Run(ctx context.Context) {
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.Flush()
			return
		case <-t.C:
			b.Flush()
		}
	}
}
