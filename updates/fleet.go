package updates

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// fleet holds the fleet-wide cap on in-place updates in flight: from the
// call recorded in status.update until the update ends (every node on the
// release, or a fallback). What counts is what survives a restart or a
// new leader: the ObjectStores whose status.update the informer holds;
// plus the ones this process recorded and the cache does not show yet,
// less the ones it ended and the cache does not show ended yet. A new
// leader therefore starts no update while the fleet's count is full.
type fleet struct {
	max int // 0: no cap
	// on: the cap or the failure budget's first updates need the count.
	on      bool
	stores  cache.Indexer
	enqueue func(string)

	mu sync.Mutex
	// held: recorded by this process, not yet ended by it; the release.
	held map[string]string
	// ended: ended by this process while the cache may still show the
	// record.
	ended map[string]struct{}
	// waiting: keys told UpdateQueued for the cap, queued again when an
	// update ends.
	waiting map[string]struct{}
}

func newFleet(max int, budget bool, stores cache.Indexer, enqueue func(string)) *fleet {
	return &fleet{max: max, on: max > 0 || budget, stores: stores, enqueue: enqueue,
		held: map[string]string{}, ended: map[string]struct{}{}, waiting: map[string]struct{}{}}
}

// flight is an ObjectStore's update in flight.
type flight struct{ key, release string }

func keysOf(fs []flight) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.key
	}
	return out
}

// inFlight lists the other ObjectStores with an update in flight, sorted.
// It reads status.update off the cached objects without converting them:
// a scan of a thousand ObjectStores costs well under a millisecond, and
// it runs only for a tenant about to start an update.
func (f *fleet) inFlight(key string) []flight {
	if !f.on {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlightLocked(key)
}

func (f *fleet) inFlightLocked(key string) []flight {
	seen := map[string]string{}
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
			seen[k] = release
		}
	}
	for k, r := range f.held {
		seen[k] = r
	}
	delete(seen, key)
	out := make([]flight, 0, len(seen))
	for k, r := range seen {
		out = append(out, flight{k, r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// firstNamespaces counts the namespaces other than ns with an update to
// release among fs, but for those that failed it (counted as failed: a
// namespace that failed and tries again takes one of the budget's
// places, not two).
func firstNamespaces(fs []flight, ns, release string, failed []string) []string {
	seen := map[string]bool{}
	for _, f := range failed {
		seen[f] = true
	}
	var out []string
	for _, f := range fs {
		fns, _, _ := strings.Cut(f.key, "/")
		if f.release == release && fns != ns && !seen[fns] {
			seen[fns] = true
			out = append(out, fns)
		}
	}
	return out
}

// reserve counts key in before its call is recorded; false when the
// fleet is full, when key's namespace holds its share of the places
// while another namespace waits (see overShare; the message says so),
// or when firstLimit() (>= 0, read under the lock, after the count of in
// flight) namespaces already have an update to an unproven release in
// flight, and key is queued again when an update ends. Two workers
// deciding at once cannot both take the last place.
func (f *fleet) reserve(key, release string, firstLimit func() (int, []string)) (bool, string) {
	if !f.on {
		return true, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.held[key]; ok {
		return true, ""
	}
	others := f.inFlightLocked(key)
	ns, _, _ := strings.Cut(key, "/")
	first, failed := firstLimit()
	if (f.max > 0 && len(others) >= f.max) || (first >= 0 && len(firstNamespaces(others, ns, release, failed)) >= first) {
		f.waiting[key] = struct{}{}
		return false, ""
	}
	if held, share, over := f.overShareLocked(ns, others); over {
		f.waiting[key] = struct{}{}
		return false, fmt.Sprintf("namespace %s has %d of the fleet's %d in-place updates in flight, its share while other namespaces wait (%d); it starts when one of them ends",
			ns, held, f.max, share)
	}
	f.held[key] = release
	delete(f.ended, key)
	delete(f.waiting, key)
	return true, ""
}

// overShareLocked: while a namespace other than ns waits for a place,
// ns may hold no more than its share of the cap, the cap split among the
// namespaces in flight or waiting (rounded up). Without it, a tenant
// whose many ObjectStores hold their places until the timeout (nodes
// that never report the release) took every place that freed, and the
// other tenants waited a timeout after a timeout. It returns how many
// places ns holds and its share.
func (f *fleet) overShareLocked(ns string, others []flight) (int, int, bool) {
	if f.max <= 0 {
		return 0, 0, false
	}
	contending := map[string]bool{ns: true}
	held := 0
	for _, o := range others {
		ons, _, _ := strings.Cut(o.key, "/")
		contending[ons] = true
		if ons == ns {
			held++
		}
	}
	othersWait := false
	for k := range f.waiting {
		wns, _, _ := strings.Cut(k, "/")
		contending[wns] = true
		othersWait = othersWait || wns != ns
	}
	share := (f.max + len(contending) - 1) / len(contending)
	return held, share, othersWait && held >= share
}

// wait notes key as waiting for a place (decide said UpdateQueued).
func (f *fleet) wait(key string) {
	if !f.on {
		return
	}
	f.mu.Lock()
	f.waiting[key] = struct{}{}
	f.mu.Unlock()
}

// unwait: key no longer waits for a place (its sync decided anything
// but UpdateQueued).
func (f *fleet) unwait(key string) {
	if !f.on {
		return
	}
	f.mu.Lock()
	delete(f.waiting, key)
	f.mu.Unlock()
}

// end: key's update ended (or its record was not written). The waiting
// keys are queued again to look for the place.
func (f *fleet) end(key string) {
	if !f.on {
		return
	}
	f.mu.Lock()
	delete(f.held, key)
	f.ended[key] = struct{}{}
	// The waiting stay waiting until they take a place or stop wanting
	// one (unwait): a namespace's share counts them.
	waiting := make([]string, 0, len(f.waiting))
	for k := range f.waiting {
		waiting = append(waiting, k)
	}
	f.mu.Unlock()
	for _, k := range waiting {
		f.enqueue(k)
	}
}

// holds tells whether this process recorded key's update and has not
// seen it end.
func (f *fleet) holds(key string) bool {
	if !f.on {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.held[key]
	return ok
}

// forget drops a deleted ObjectStore.
func (f *fleet) forget(key string) {
	if !f.on {
		return
	}
	f.mu.Lock()
	_, held := f.held[key]
	delete(f.waiting, key)
	f.mu.Unlock()
	if held {
		f.end(key)
	}
	f.mu.Lock()
	delete(f.ended, key)
	f.mu.Unlock()
}
