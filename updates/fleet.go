package updates

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/object-store-operator/operator/api/v1"
	"github.com/object-store-operator/operator/internal/fairshare"
)

// fleet holds the fleet-wide cap on in-place updates in flight: from the
// call recorded in status.update until the update ends (every node on the
// release, or a fallback). What counts is the places this process holds:
// the updates it recorded in its term, and those it found recorded when
// the term began (adopt), which a new leader or a restarted process must
// count so as to start no update while the fleet is full. A record found
// later, that this process did not write, is not counted: a tenant that
// may write its ObjectStore's status could otherwise forge records and
// take every place, past any share.
type fleet struct {
	max int // 0: no cap
	// on: the cap or the failure budget's first updates need the count.
	on     bool
	stores cache.Indexer
	// unitOf names the party a key's place counts against (units.go).
	unitOf func(key string) string
	places *fairshare.Scheduler
}

func newFleet(max int, budget bool, stores cache.Indexer, unit func(string) string, enqueue func(string)) *fleet {
	f := &fleet{max: max, on: max > 0 || budget, stores: stores,
		unitOf: func(key string) string { return unitOf(unit, key) }}
	// Keys told UpdateQueued (for the cap, the budget or a share) wait
	// until they take a place or stop wanting one (unwait), and are
	// queued again whenever an update ends: a unit's share counts them.
	f.places = fairshare.New(fairshare.Options{Total: max, Share: true, Wake: enqueue})
	return f
}

// adopt starts a term's count afresh from the updates recorded in the
// cached ObjectStores (the cache synced): a previous leader's, or this
// process's before a restart. A tenant can forge a record, so each unit
// is adopted within the share a fresh start would give it (fairshare
// AdoptFound); a record not adopted is followed to its end uncounted.
func (f *fleet) adopt() {
	if !f.on {
		return
	}
	f.places.Reset()
	byUnit := map[string][]string{}
	notes := map[string]string{}
	keys := f.stores.ListKeys()
	slices.Sort(keys)
	for _, k := range keys {
		obj, exists, err := f.stores.GetByKey(k)
		u, ok := obj.(*unstructured.Unstructured)
		if err != nil || !exists || !ok {
			continue
		}
		// Only a record the updates loop will follow, and so end within
		// the update's timeout: an ObjectStore that does not convert is
		// never synced, and would keep its place for the whole term.
		store, err := v1.FromUnstructured(u)
		if err != nil || store.Status.Update == nil {
			continue
		}
		unit := f.unitOf(k)
		byUnit[unit] = append(byUnit[unit], k)
		notes[k] = store.Status.Update.Release
	}
	f.places.AdoptFound(byUnit, notes)
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
	return flightsOf(f.places.Holders(key))
}

func flightsOf(hs []fairshare.Holder) []flight {
	out := make([]flight, len(hs))
	for i, h := range hs {
		out[i] = flight{key: h.Key, release: h.Note, unit: h.Party}
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
	unit := f.unitOf(key)
	first := func(others []fairshare.Holder) bool {
		limit, failed := firstLimit()
		return limit < 0 || len(firstUnits(flightsOf(others), unit, release, failed)) < limit
	}
	ok, r := f.places.Acquire(fairshare.Holder{Key: key, Party: unit, Note: release}, first)
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
	if f.on {
		f.places.Release(key)
	}
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
	f.places.Release(key) // its place, or its wait
}
