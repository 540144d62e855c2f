package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowToStop is leader work that takes a while to return once its term
// ends: workers finishing a sync in flight (a StatefulSet patch, a
// tenant's MinIO answering a cancelled call slowly, a pull of a tenant's
// registry), which Run waits for.
type slowToStop struct {
	release       chan struct{}
	running, most atomic.Int32
}

func (s *slowToStop) NeedLeaderElection() bool { return true }

func (s *slowToStop) Run(ctx context.Context) error {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		most := s.most.Load()
		if n <= most || s.most.CompareAndSwap(most, n) {
			break
		}
	}
	<-ctx.Done()
	<-s.release
	return nil
}

// TestATermStartsOnlyOnceThePreviousTermsWorkHasReturned: client-go's
// LeaderElector calls OnStartedLeading with go and returns from Run as
// soon as the lease is lost, without waiting for it; cmd/operator/leader.go
// then builds a new elector at once, which may win the next term while the
// previous term's work still returns. The two terms' work never overlaps,
// and the old term ending late never clears the new term's mark: Leading()
// (what binsource writes with, what the leader metric reads) names the
// new term for as long as it lasts.
func TestATermStartsOnlyOnceThePreviousTermsWorkHasReturned(t *testing.T) {
	terms := make(chan context.Context)
	m := NewManager(electOn(terms, true), zerolog.Nop())
	slow := &slowToStop{release: make(chan struct{})}
	m.Add(slow)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() { _ = m.Start(ctx) }()

	term1, end1 := context.WithCancel(ctx)
	terms <- term1
	require.Eventually(t, func() bool { return m.Leading() == term1 && slow.running.Load() == 1 }, time.Second, time.Millisecond)
	end1() // the lease is lost; term 1's work is still returning

	term2, end2 := context.WithCancel(ctx)
	defer end2()
	terms <- term2 // re-acquired at once
	assert.NotEqual(t, term2, m.Leading(), "term 2 waits for term 1's work")
	assert.Equal(t, int32(1), slow.running.Load(), "one term's work at a time")

	slow.release <- struct{}{} // term 1's work returns at last
	require.Eventually(t, func() bool { return m.Leading() == term2 }, time.Second, time.Millisecond)
	assert.Equal(t, term2, m.Leading(), "this replica leads (term 2), and Leading() says so")
	assert.LessOrEqual(t, slow.most.Load(), int32(1), "the terms' work never overlapped")
	close(slow.release)
}
