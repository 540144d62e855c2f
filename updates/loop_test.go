package updates

import "context"

// sync reconciles key as a worker of the Loop does (the term check, the
// lookup, Forget), without the queue: the tests' way in.
func (c *Controller) sync(ctx context.Context, key string) error { return c.loop.SyncKey(ctx, key) }
