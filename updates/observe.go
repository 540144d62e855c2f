package updates

import (
	"context"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/window"
)

// observe reads what decide needs: the status, the store's resolution of
// the image, the tenant's nodes, its StatefulSets and this process's call.
func (c *Controller) observe(ctx context.Context, key string, store *v1.ObjectStore) (observation, *tenant) {
	st := statusOf(store)
	o := observation{now: c.cfg.Clock.Now(), namespace: store.Namespace, unit: c.unitOf(key), image: store.Spec.Image, recorded: store.Status.Update, prev: st.cond,
		paused: store.Annotations[v1.UpdatesPausedAnnotation] == "true", call: c.calls.state(key),
		generation: store.Generation, fallback: c.fallbackOf(store), stopped: st.stopped}
	var bin *v1.BinaryStatus
	o.binary, bin = binaryOf(store)
	t, reach := c.loadTenant(ctx, store)
	if reach == nil {
		o.nodes, reach = c.serverInfo(ctx, t)
	}
	o.reach = reach
	o.sets = c.setsOf(store)
	if c.cfg.Platforms != nil {
		o.platforms = c.cfg.Platforms(store.Namespace, store.Name)
	}
	release := o.binary.release
	if o.recorded != nil {
		release = o.recorded.Release
	}
	if release != "" {
		o.updateURL, o.urlErr = updateURL(c.cfg.UpdateURL, store.Spec.Image, bin, release)
		if o.urlErr == nil && t != nil {
			o.trustErr = c.preflight(t.roots, o.updateURL, o.now)
		}
	}
	c.observeFleet(ctx, key, store, &o)
	return o, t
}

// fallbackOf is the ObjectStore's fallback: its own, else the
// operator's (Config.Fallback; empty is Rolling).
func (c *Controller) fallbackOf(store *v1.ObjectStore) string {
	if f := store.Spec.Updates.Fallback; f == v1.FallbackRolling || f == v1.FallbackNone {
		return f
	}
	if c.cfg.Fallback == v1.FallbackNone {
		return v1.FallbackNone
	}
	return v1.FallbackRolling
}

// observeFleet reads what holds an update back before it starts: the
// tenant's window, the failure budget of the release, and the fleet's
// updates in flight. None of it matters to an update already recorded,
// nor to a tenant whose nodes already run the release.
func (c *Controller) observeFleet(ctx context.Context, key string, store *v1.ObjectStore, o *observation) {
	if w := store.Spec.Updates.Window; w != nil {
		o.window = &window.Spec{Schedule: w.Schedule, Duration: w.Duration}
	}
	b := o.binary
	if o.recorded != nil || !b.resolved || !b.available || (o.reach == nil && allOn(o.nodes, b.release)) {
		return
	}
	o.resumed = store.Annotations[v1.ResumeUpdatesAnnotation]
	o.halt, o.haltErr = c.halts.state(ctx, b.release)
	o.inFlight = c.fleet.inFlight(key)
}
