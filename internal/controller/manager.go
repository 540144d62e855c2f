package controller

import (
	"context"
	stdsync "sync"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// Runnable is a part the Manager starts. It says itself whether it needs
// leadership, as controller-runtime's and cert-manager's runnables do
// (LeaderElectionRunnable): one that does runs only while this replica
// leads, once per leadership term, and returns when the term's context
// ends; one that does not runs on every replica for the life of the
// process.
type Runnable interface {
	Run(ctx context.Context) error
	NeedLeaderElection() bool
}

// Elector runs lead for each leadership term this replica wins, with a
// context that ends with the term, until ctx ends (client-go's leader
// election); an error is that it cannot elect at all. lead returns once
// everything of the term has stopped.
type Elector func(ctx context.Context, lead func(term context.Context)) error

// Manager starts every Runnable by the one rule: leaders' work during
// terms, the rest on every replica. Nothing else in the operator decides
// who acts.
type Manager struct {
	elect     Elector
	log       zerolog.Logger
	runnables []Runnable

	mu   stdsync.Mutex
	term context.Context
	// serial is held by a term's work from its start until it returned.
	serial stdsync.Mutex
}

// NewManager returns a Manager electing with elect; nil: this replica
// always leads (one replica, leader election off).
func NewManager(elect Elector, log zerolog.Logger) *Manager {
	if elect == nil {
		elect = func(ctx context.Context, lead func(context.Context)) error {
			lead(ctx)
			return nil
		}
	}
	return &Manager{elect: elect, log: log}
}

// Add registers runnables; call before Start.
func (m *Manager) Add(rs ...Runnable) { m.runnables = append(m.runnables, rs...) }

// Leading is the current term's context, nil while following: a part on
// every replica that writes only as the leader (knative's IsLeaderFor)
// writes with it, so its writes end with the term.
func (m *Manager) Leading() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.term
}

// Start runs every Runnable until ctx ends. One on every replica that
// fails ends Start with its error (the process stops); one that needs
// leadership and fails is logged, and runs again next term.
func (m *Manager) Start(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	var leaders []Runnable
	for _, r := range m.runnables {
		if r.NeedLeaderElection() {
			leaders = append(leaders, r)
			continue
		}
		g.Go(func() error { return r.Run(ctx) })
	}
	g.Go(func() error { return m.elect(ctx, func(term context.Context) { m.lead(term, leaders) }) })
	return g.Wait()
}

// lead runs the leaders' work for one term and returns once all of it
// has returned. Terms never overlap: client-go starts a term's work with
// go and may win the next term while the last one's work is still
// returning (a sync in flight), so a term starts only once the previous
// term's work has returned, and never clears another term's mark.
func (m *Manager) lead(term context.Context, leaders []Runnable) {
	m.serial.Lock()
	defer m.serial.Unlock()
	if term.Err() != nil {
		return
	}
	m.setTerm(term)
	defer m.setTerm(nil)
	var wg stdsync.WaitGroup
	for _, r := range leaders {
		wg.Go(func() {
			if err := r.Run(term); err != nil && term.Err() == nil {
				m.log.Error().Err(err).Msg("leader work stopped before the term ended")
			}
		})
	}
	wg.Wait()
}

func (m *Manager) setTerm(term context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.term = term
}

// RunnableFunc is a Runnable made of a function, for parts that declare
// nothing themselves (informers, the trust pool).
type RunnableFunc struct {
	Fn func(ctx context.Context) error
	// Leader: it runs only while leading.
	Leader bool
}

// Run calls Fn.
func (f RunnableFunc) Run(ctx context.Context) error { return f.Fn(ctx) }

// NeedLeaderElection is Leader.
func (f RunnableFunc) NeedLeaderElection() bool { return f.Leader }
