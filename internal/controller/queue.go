package controller

import (
	stdsync "sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Queue is a rate-limited queue of keys that outlives the runs of its
// workers. A part that needs leadership runs once per leadership term
// (Manager); each run (Run) works on a client-go queue of its own, shut
// down when the run ends so its workers return, and the next run starts
// on a fresh one. What is added between runs waits in that fresh queue.
// Event handlers and a controller's own sources of keys hold the Queue,
// never the queue of one run. The rate limiter, and with it each key's
// backoff, is shared by every run.
type Queue struct {
	limiter workqueue.TypedRateLimiter[string]
	config  workqueue.TypedRateLimitingQueueConfig[string]

	mu    stdsync.Mutex
	inner workqueue.TypedRateLimitingInterface[string]
}

var _ workqueue.TypedRateLimitingInterface[string] = (*Queue)(nil)

// NewQueue returns a Queue whose runs' queues are made with limiter and
// config (its Name is the workqueue_* metrics' label).
func NewQueue(limiter workqueue.TypedRateLimiter[string], config workqueue.TypedRateLimitingQueueConfig[string]) *Queue {
	return &Queue{limiter: limiter, config: config}
}

// current is the queue of the current (or next) run.
func (q *Queue) current() workqueue.TypedRateLimitingInterface[string] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inner == nil {
		q.inner = workqueue.NewTypedRateLimitingQueueWithConfig(q.limiter, q.config)
	}
	return q.inner
}

// detach hands the current queue to a run that is ending: what is added
// from now on goes to the next run's.
func (q *Queue) detach(inner workqueue.TypedRateLimitingInterface[string]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inner == inner {
		q.inner = nil
	}
}

func (q *Queue) Add(key string)                       { q.current().Add(key) }
func (q *Queue) Len() int                             { return q.current().Len() }
func (q *Queue) Get() (string, bool)                  { return q.current().Get() }
func (q *Queue) Done(key string)                      { q.current().Done(key) }
func (q *Queue) ShutDown()                            { q.current().ShutDown() }
func (q *Queue) ShutDownWithDrain()                   { q.current().ShutDownWithDrain() }
func (q *Queue) ShuttingDown() bool                   { return q.current().ShuttingDown() }
func (q *Queue) AddAfter(key string, d time.Duration) { q.current().AddAfter(key, d) }
func (q *Queue) AddRateLimited(key string)            { q.current().AddRateLimited(key) }
func (q *Queue) Forget(key string)                    { q.current().Forget(key) }
func (q *Queue) NumRequeues(key string) int           { return q.current().NumRequeues(key) }
