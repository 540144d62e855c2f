package controller

import (
	"context"
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
	release chan struct{}
}

func (s *slowToStop) NeedLeaderElection() bool { return true }

func (s *slowToStop) Run(ctx context.Context) error {
	<-ctx.Done()
	<-s.release
	return nil
}

// TestAnOldTermEndingLateClearsTheNewTermsLeadership: client-go's
// LeaderElector calls OnStartedLeading with `go` and returns from Run as
// soon as the lease is lost, without waiting for it; cmd/operator/leader.go
// then builds a new elector at once, which may win the next term while the
// previous term's lead (Manager.lead) still waits for its work to return.
// That lead's `defer m.setTerm(nil)` then clears the new term: Leading()
// is nil while this replica leads, so binsource (which writes
// BinaryAvailable and status.binary only with Leading()) writes nothing
// for the rest of the term, and objectstore_operator_leader reads 0.
func TestAnOldTermEndingLateClearsTheNewTermsLeadership(t *testing.T) {
	terms := make(chan context.Context)
	elect := func(ctx context.Context, lead func(context.Context)) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case term := <-terms:
				go lead(term) // as client-go's OnStartedLeading
			}
		}
	}
	m := NewManager(elect, zerolog.Nop())
	slow := &slowToStop{release: make(chan struct{})}
	m.Add(slow)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()

	term1, end1 := context.WithCancel(ctx)
	terms <- term1
	require.Eventually(t, func() bool { return m.Leading() == term1 }, time.Second, time.Millisecond)
	end1() // the lease is lost; term 1's work is still returning

	term2, end2 := context.WithCancel(ctx)
	defer end2()
	terms <- term2 // re-acquired at once
	require.Eventually(t, func() bool { return m.Leading() == term2 }, time.Second, time.Millisecond)

	slow.release <- struct{}{} // term 1's work returns at last
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, term2, m.Leading(), "this replica still leads (term 2), but Leading() says it follows")
	close(slow.release)
}
