package updates

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/object-store-operator/operator/internal/fairshare"
)

// fleet holds the fleet-wide cap on in-place updates in flight: from the
// call recorded in status.update until the update ends (every node on the
// release, or a fallback). What counts is what survives a restart or a
// new leader: the ObjectStores whose status.update the informer holds
// (the places' Observed holders); plus the ones this process recorded and
// the cache does not show yet (held in places), less the ones it ended
// and the cache does not show ended yet. A new leader therefore starts no
// update while the fleet's count is full.
type fleet struct {
	max int // 0: no cap
	// on: the cap or the failure budget's first updates need the count.
	on     bool
	stores cache.Indexer
	// unitOf names the party a key's place counts against (units.go).
	unitOf func(key string) string

	// mu orders the places' calls with ended, which their Observed reads.
	mu     sync.Mutex
	places *fairshare.Scheduler
	// ended: ended by this process while the cache may still show the
	// record.
	ended map[string]struct{}
}

func newFleet(max int, budget bool, stores cache.Indexer, unit func(string) string, enqueue func(string)) *fleet {
	f := &fleet{max: max, on: max > 0 || budget, stores: stores, ended: map[string]struct{}{},
		unitOf: func(key string) string { return unitOf(unit, key) }}
	// Keys told UpdateQueued (for the cap, the budget or a share) wait
	// until they take a place or stop wanting one (unwait), and are
	// queued again whenever an update ends: a unit's share counts them.
	f.places = fairshare.New(fairshare.Options{Total: max, Share: true,
		Observed: f.recorded, Wake: enqueue})
	return f
}

// flight is an ObjectStore's update in flight; unit is what it counts
// against ("": the key's namespace).
type flight struct{ key, release, unit string }

// unitOf is the unit f counts against.
func (f flight) unitOf() string {
	if f.unit != "" {
		return f.unit
	}
	return unitOf(nil, f.key)
}

func keysOf(fs []flight) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.key
	}
	return out
}

// inFlight lists the other ObjectStores with an update in flight, sorted.
func (f *fleet) inFlight(key string) []flight {
	if !f.on {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return flightsOf(f.places.Holders(key))
}

func flightsOf(hs []fairshare.Holder) []flight {
	out := make([]flight, len(hs))
	for i, h := range hs {
		out[i] = flight{key: h.Key, release: h.Note, unit: h.Party}
	}
	return out
}

// recorded lists the ObjectStores whose cached object records an update,
// but those this process ended. It reads status.update off the cached
// objects without converting them: a scan of a thousand ObjectStores
// costs well under a millisecond, and it runs only for a tenant about to
// start an update. Called by places, under f.mu.
func (f *fleet) recorded() []fairshare.Holder {
	var out []fairshare.Holder
	for _, obj := range f.stores.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		k := u.GetNamespace() + "/" + u.GetName()
		up, recorded, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "update")
		if !recorded {
			delete(f.ended, k) // the cache caught up
			continue
		}
		if _, gone := f.ended[k]; !gone {
			release, _ := up.(map[string]any)["release"].(string)
			out = append(out, fairshare.Holder{Key: k, Party: f.unitOf(k), Note: release})
		}
	}
	return out
}

// firstUnits lists the units other than unit with an update to release
// among fs, but for those that failed it (counted as failed: a unit
// that failed and tries again takes one of the budget's places, not
// two).
func firstUnits(fs []flight, unit, release string, failed []string) []string {
	seen := map[string]bool{}
	for _, f := range failed {
		seen[f] = true
	}
	var out []string
	for _, f := range fs {
		if u := f.unitOf(); f.release == release && u != unit && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// reserve counts key in before its call is recorded; false when the
// fleet is full, when key's unit holds its share of the places while
// another unit waits (the message says so), or when firstLimit() (>= 0,
// read under the lock, after the count of in flight) units already have
// an update to an unproven release in flight, and key is queued again
// when an update ends. Two workers deciding at once cannot both take the
// last place.
//
// The share: while a unit other than key's waits for a place, key's
// may hold no more than the cap split among the units in flight or
// waiting (rounded up). Without it, a tenant whose many ObjectStores hold
// their places until the timeout (nodes that never report the release)
// took every place that freed, and the other tenants waited a timeout
// after a timeout.
func (f *fleet) reserve(key, release string, firstLimit func() (int, []string)) (bool, string) {
	if !f.on {
		return true, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	unit := f.unitOf(key)
	first := func(others []fairshare.Holder) bool {
		limit, failed := firstLimit()
		return limit < 0 || len(firstUnits(flightsOf(others), unit, release, failed)) < limit
	}
	ok, r := f.places.Acquire(fairshare.Holder{Key: key, Party: unit, Note: release}, first)
	if ok {
		delete(f.ended, key)
	}
	if r.Why == fairshare.OverShare {
		return false, fmt.Sprintf("%s has %d of the fleet's %d in-place updates in flight, its share while other %s wait (%d); it starts when one of them ends",
			unitName(unit), r.Held, f.max, unitNoun(unit), r.Share)
	}
	return ok, ""
}

// wait notes key as waiting for a place (decide said UpdateQueued).
func (f *fleet) wait(key string) {
	if !f.on {
		return
	}
	f.places.Wait(key, f.unitOf(key))
}

// unwait: key no longer waits for a place (its sync decided anything
// but UpdateQueued).
func (f *fleet) unwait(key string) {
	if f.on {
		f.places.Unwait(key)
	}
}

// end: key's update ended (or its record was not written). The waiting
// keys are queued again to look for the place.
func (f *fleet) end(key string) {
	if !f.on {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Released before it is marked ended, so the places see it held
	// (recorded) and wake the waiting; they look under f.mu, after.
	f.places.Release(key)
	f.ended[key] = struct{}{}
}

// holds tells whether this process recorded key's update and has not
// seen it end.
func (f *fleet) holds(key string) bool {
	if !f.on {
		return false
	}
	_, ok := f.places.Holding(key)
	return ok
}

// forget drops a deleted ObjectStore.
func (f *fleet) forget(key string) {
	if !f.on {
		return
	}
	if f.holds(key) {
		f.end(key)
	}
	f.places.Unwait(key)
	f.mu.Lock()
	delete(f.ended, key)
	f.mu.Unlock()
}
