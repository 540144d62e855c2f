package binsource

import (
	"context"

	"k8s.io/client-go/util/workqueue"
)

// A sync never waits for a registry: it submits its ObjectStore's pull
// and returns, and the pull's end queues the key again for the sync that
// takes the result.

// awaited is the pull an ObjectStore's sync submitted, and its result once
// it ended.
type awaited struct {
	image, credentials string
	withdraw           func()
	done               bool
	res                *Result
	err                error
}

// pull returns the result of the pull of image with kc for the
// ObjectStore key once it ended; until then it submits the pull (once) and
// reports it not ended. Syncs never wait for a registry: a worker that
// did would be held by a registry that never answers, and with it every
// other tenant's sync. A pull for what the ObjectStore no longer wants
// (its image or pull Secrets changed) is withdrawn.
func (c *Controller) pull(ctx context.Context, key, ns, image string, kc *keychain) (res *Result, ended bool, err error) {
	c.mu.Lock()
	p, ok := c.pulls[key]
	if ok && p.image == image && p.credentials == kc.id {
		res, ended, err = p.res, p.done, p.err
		if ended {
			delete(c.pulls, key)
		}
		c.mu.Unlock()
		return res, ended, err
	}
	next := &awaited{image: image, credentials: kc.id}
	c.pulls[key] = next
	c.mu.Unlock()
	if ok && p.withdraw != nil {
		p.withdraw()
	}
	withdraw := c.cfg.Fetcher.Submit(ctx, ns, image, kc, func(res *Result, err error) {
		c.mu.Lock()
		if c.pulls[key] == next {
			next.done, next.res, next.err = true, res, err
		}
		c.mu.Unlock()
		c.queue.Add(key)
	})
	c.mu.Lock()
	next.withdraw = withdraw
	c.mu.Unlock()
	return nil, false, nil
}

// pulling reports whether a pull for the ObjectStore key is submitted
// and its result not yet taken.
func (c *Controller) pulling(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pulls[key]
	return ok
}

// keepWhilePulling is a rate limiter whose Forget leaves a key's backoff
// alone while a pull for it is in flight: the sync that submitted it
// succeeded only in submitting.
type keepWhilePulling struct {
	workqueue.TypedRateLimiter[string]
	pulling func(string) bool
}

func (k keepWhilePulling) Forget(key string) {
	if !k.pulling(key) {
		k.TypedRateLimiter.Forget(key)
	}
}
