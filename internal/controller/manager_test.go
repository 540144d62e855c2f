package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a Runnable that counts its runs and holds until its
// context ends.
type counting struct {
	leader  bool
	runs    atomic.Int32
	running atomic.Bool
}

func (c *counting) NeedLeaderElection() bool { return c.leader }

func (c *counting) Run(ctx context.Context) error {
	c.runs.Add(1)
	c.running.Store(true)
	defer c.running.Store(false)
	<-ctx.Done()
	return nil
}

// electOn is an Elector whose terms are the contexts sent on terms; with
// async each term's work starts with go, as client-go's OnStartedLeading.
func electOn(terms <-chan context.Context, async bool) Elector {
	return func(ctx context.Context, lead func(context.Context)) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case term := <-terms:
				if async {
					go lead(term)
				} else {
					lead(term)
				}
			}
		}
	}
}

// TestTheManagerRunsLeadersOnlyDuringTermsAndTheRestAlways: the one
// rule of who acts. A follower runs what needs no leadership; each term
// runs the leaders' work again, ended with the term.
func TestTheManagerRunsLeadersOnlyDuringTermsAndTheRestAlways(t *testing.T) {
	terms := make(chan context.Context)
	m := NewManager(electOn(terms, false), zerolog.Nop())
	everywhere, leader := &counting{}, &counting{leader: true}
	m.Add(everywhere, leader)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- m.Start(ctx) }()

	require.Eventually(t, everywhere.running.Load, time.Second, time.Millisecond, "on every replica")
	assert.Zero(t, leader.runs.Load(), "a follower runs no leader's work")
	assert.Nil(t, m.Leading())

	for n := int32(1); n <= 2; n++ {
		term, end := context.WithCancel(ctx)
		terms <- term
		require.Eventually(t, func() bool { return leader.running.Load() && leader.runs.Load() == n }, time.Second, time.Millisecond)
		assert.Equal(t, term, m.Leading())
		end()
		require.Eventually(t, func() bool { return !leader.running.Load() && m.Leading() == nil }, time.Second, time.Millisecond,
			"the term's work ends with the term")
		assert.True(t, everywhere.running.Load(), "the rest carries on")
	}
	assert.Equal(t, int32(1), everywhere.runs.Load())
	stop()
	require.NoError(t, <-done)
}

func TestAFailureOnEveryReplicaStopsTheManager(t *testing.T) {
	m := NewManager(nil, zerolog.Nop())
	leader := &counting{leader: true}
	m.Add(leader, RunnableFunc{Fn: func(context.Context) error { return errors.New("boom") }})
	assert.EqualError(t, m.Start(t.Context()), "boom")
	assert.False(t, leader.running.Load(), "its leader's work stopped too")
}
