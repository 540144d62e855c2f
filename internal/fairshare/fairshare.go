// Package fairshare shares a number of slots among parties (a namespace,
// a registry server) so that one party can hurt only itself. It is the
// one scheduler behind the operator's bounded work: certificate restarts,
// in-place updates in flight across the fleet, update calls per
// namespace, and pulls. What differs between them is options:
//
//   - Total bounds the slots in all; PerParty what one party holds, and
//     PerKey what the holders naming one further key hold (a registry
//     server behind several names).
//   - Share: while another party waits, a party holds no more than Total
//     split among the contending parties (those holding or waiting,
//     rounded up), so a party with many holders cannot take every slot
//     that frees; alone, it may take them all.
//   - AdoptFound counts work a previous process started, as the cluster
//     records it, within the shares a fresh start would give.
//
// A slot is asked for in one of two ways. Acquire answers at once; a
// refused key waits, and Wake is called with it when a slot it may take
// frees (the caller queues it again; the scheduler holds no goroutine).
// Enqueue puts a key in line instead, and Next hands the slots out: the
// parties with a key in line take turns (round-robin), and within a
// party the oldest key that may start goes first.
package fairshare

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Options are a scheduler's rules. A zero bound is no bound.
type Options struct {
	// Total is how many slots there are.
	Total int
	// PerParty is how many slots one party may hold.
	PerParty int
	// PerKey is how many slots the holders naming one of Holder.Keys may
	// hold.
	PerKey int
	// Share bounds a party to its share of Total while another party
	// waits (needs Total); with nobody else waiting a party may use every
	// slot.
	Share bool
	// Wake is called, outside the lock, with each waiting key a freed
	// slot may serve. nil: nobody is woken (Next hands the slots out).
	Wake func(key string)
	// Clock stamps Holder.Since; nil: the real clock.
	Clock clock.PassiveClock
}

// Holder is who holds, or asks for, a slot.
type Holder struct {
	// Key names the holder; one key holds one slot at most.
	Key string
	// Party is who the slot counts against for PerParty and Share.
	Party string
	// Keys are further keys the slot counts against for PerKey.
	Keys []string
	// Note is the caller's word about the hold, handed back by Holders.
	Note string
	// Since is when the slot was taken.
	Since time.Time
}

// Why says which rule refused a slot.
type Why int

const (
	// Full: every slot is taken.
	Full Why = iota + 1
	// PartyFull: the party holds PerParty slots.
	PartyFull
	// KeyFull: a key of the holder's holds PerKey slots.
	KeyFull
	// Refused: the caller's own condition said no.
	Refused
	// OverShare: the party holds its share while others contend.
	OverShare
)

// Refusal says why a key got no slot.
type Refusal struct {
	Why Why
	// Held and Share are, for OverShare, what the party holds and its
	// share.
	Held, Share int
	// Holders are the keys the refused key waits for, sorted: every
	// holder when Full, its party's for PartyFull and OverShare.
	Holders []string
}

// Scheduler hands out slots by its Options. It is safe for concurrent
// use.
type Scheduler struct {
	o Options

	mu   sync.Mutex
	held map[string]Holder
	// waiters by key; waiting per party, in the order they came.
	waiters map[string]*waiter
	waiting map[string][]*waiter
	// turns are the parties with a waiter, the next to be served first.
	turns []string
}

type waiter struct {
	Holder
	// ready: Next may start it (Enqueue); an Acquire waiter never is.
	ready bool
	// party: a slot freed by its own party wakes it; otherwise any does.
	party bool
}

// New makes a scheduler with options o.
func New(o Options) *Scheduler {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Scheduler{o: o, held: map[string]Holder{}, waiters: map[string]*waiter{}, waiting: map[string][]*waiter{}}
}

// Total is the bound on slots in all (0: none).
func (s *Scheduler) Total() int { return s.o.Total }

// Acquire takes a slot for h.Key (true at once if it holds one). ok, when
// not nil, is the caller's own condition, asked under the lock with the
// other holders once the slot is not full: two callers deciding at once
// cannot both take the last slot. Refused, the key waits until it takes a
// slot or Unwait, and is woken when one it may take frees.
func (s *Scheduler) Acquire(h Holder, ok func(others []Holder) bool) (bool, Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.held[h.Key]; held {
		return true, Refusal{}
	}
	others := s.holdersLocked(h.Key)
	r := s.refusal(h, others, ok)
	if r.Why != 0 {
		w := s.waitLocked(h)
		w.party = r.Why == PartyFull && s.o.Total <= 0 && !s.o.Share
		return false, r
	}
	s.holdLocked(h)
	return true, Refusal{}
}

// refusal applies the rules in order: the total, the party's and keys'
// bounds, the caller's condition, the share.
func (s *Scheduler) refusal(h Holder, others []Holder, ok func([]Holder) bool) Refusal {
	party, keys := tally(others)
	switch {
	case s.o.Total > 0 && len(others) >= s.o.Total:
		return Refusal{Why: Full, Holders: keysOf(others, "")}
	case s.o.PerParty > 0 && party[h.Party] >= s.o.PerParty:
		return Refusal{Why: PartyFull, Holders: keysOf(others, h.Party)}
	case s.keyFull(h.Keys, keys):
		return Refusal{Why: KeyFull}
	case ok != nil && !ok(others):
		return Refusal{Why: Refused}
	}
	if held, share, over := s.overShare(h.Party, party); over {
		return Refusal{Why: OverShare, Held: held, Share: share, Holders: keysOf(others, h.Party)}
	}
	return Refusal{}
}

func (s *Scheduler) keyFull(ks []string, held map[string]int) bool {
	if s.o.PerKey <= 0 {
		return false
	}
	for _, k := range ks {
		if held[k] >= s.o.PerKey {
			return true
		}
	}
	return false
}

// overShare: while a party other than party waits, party may hold no
// more than its share, Total split among the parties holding or waiting
// (party among them), rounded up. It returns what party holds and its
// share.
func (s *Scheduler) overShare(party string, held map[string]int) (int, int, bool) {
	if !s.o.Share || s.o.Total <= 0 {
		return 0, 0, false
	}
	contending := map[string]bool{party: true}
	for p := range held {
		contending[p] = true
	}
	othersWait := false
	for p := range s.waiting {
		contending[p] = true
		othersWait = othersWait || p != party
	}
	share := (s.o.Total + len(contending) - 1) / len(contending)
	return held[party], share, othersWait && held[party] >= share
}

// Adopt counts h as holding a slot whatever the bounds: work this process
// did not start but finds running (a previous leader's).
func (s *Scheduler) Adopt(h Holder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.held[h.Key]; !held {
		s.holdLocked(h)
	}
}

// AdoptFound adopts, of the work found running (the keys of each party,
// in the order given), what the rules would let a fresh start take: each
// party at most its share of Total (split among the parties found,
// rounded up), the parties taking turns, and no more than Total. What
// it adopts is returned. Anything else found runs on uncounted: counted,
// a party that forged running work could take every slot. notes (may be
// nil) are the adopted holders' Notes, by key.
func (s *Scheduler) AdoptFound(found map[string][]string, notes map[string]string) []string {
	parties := slices.Sorted(maps.Keys(found))
	var picked []string
	share, total := 0, s.o.Total
	if total > 0 {
		share = (total + len(parties) - 1) / max(len(parties), 1)
	}
	for turn := 0; share == 0 || turn < share; turn++ {
		more := false
		for _, p := range parties {
			if keys := found[p]; turn < len(keys) && (total <= 0 || len(picked) < total) {
				picked = append(picked, keys[turn])
				s.Adopt(Holder{Key: keys[turn], Party: p, Note: notes[keys[turn]]})
				more = more || turn+1 < len(keys)
			}
		}
		if !more {
			break
		}
	}
	return picked
}

func (s *Scheduler) holdLocked(h Holder) {
	s.unwaitLocked(h.Key)
	h.Since = s.o.Clock.Now()
	s.held[h.Key] = h
}

// Holding is key's hold; false when it holds no slot here.
func (s *Scheduler) Holding(key string) (Holder, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[key]
	return h, ok
}

// Holders lists every holder but except, sorted by key.
func (s *Scheduler) Holders(except string) []Holder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdersLocked(except)
}

func (s *Scheduler) holdersLocked(except string) []Holder {
	all := make([]Holder, 0, len(s.held))
	for _, h := range s.held {
		all = append(all, h)
	}
	all = slices.DeleteFunc(all, func(h Holder) bool { return h.Key == except })
	slices.SortFunc(all, func(a, b Holder) int { return strings.Compare(a.Key, b.Key) })
	return all
}

// Release frees key's slot, or forgets it waiting. When it held one the
// keys the slot may serve are woken; it says how many.
func (s *Scheduler) Release(key string) int {
	s.mu.Lock()
	s.unwaitLocked(key)
	h, ok := s.held[key]
	if ok {
		delete(s.held, key)
	}
	var woken []string
	if ok {
		woken = s.wakeLocked(h)
	}
	s.mu.Unlock()
	if s.o.Wake != nil {
		for _, k := range woken {
			s.o.Wake(k)
		}
	}
	return len(woken)
}

// wakeLocked lists the waiters a slot freed by h may serve: those that
// wait for its party's bound wait for that party only. Woken waiters that
// count for a share stay waiting until they take a slot or Unwait; the
// others leave the line and ask again.
func (s *Scheduler) wakeLocked(h Holder) []string {
	if s.o.Wake == nil {
		return nil
	}
	var woken []string
	for _, w := range s.waiters {
		if !w.party || w.Party == h.Party {
			woken = append(woken, w.Key)
		}
	}
	slices.Sort(woken)
	if !s.o.Share {
		for _, k := range woken {
			s.unwaitLocked(k)
		}
	}
	return woken
}

// Wait notes key of party as waiting for any slot that frees (the caller
// found none free by its own count).
func (s *Scheduler) Wait(key, party string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.held[key]; !held {
		s.waitLocked(Holder{Key: key, Party: party}).party = false
	}
}

// Unwait: key no longer waits for a slot.
func (s *Scheduler) Unwait(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unwaitLocked(key)
}

func (s *Scheduler) waitLocked(h Holder) *waiter {
	if w, ok := s.waiters[h.Key]; ok {
		return w
	}
	w := &waiter{Holder: h}
	s.waiters[h.Key] = w
	if len(s.waiting[h.Party]) == 0 {
		s.turns = append(s.turns, h.Party)
	}
	s.waiting[h.Party] = append(s.waiting[h.Party], w)
	return w
}

func (s *Scheduler) unwaitLocked(key string) {
	w, ok := s.waiters[key]
	if !ok {
		return
	}
	delete(s.waiters, key)
	line := slices.DeleteFunc(s.waiting[w.Party], func(o *waiter) bool { return o == w })
	if len(line) > 0 {
		s.waiting[w.Party] = line
		return
	}
	delete(s.waiting, w.Party)
	if i := slices.Index(s.turns, w.Party); i >= 0 {
		s.turns = slices.Delete(s.turns, i, i+1)
	}
}

// Enqueue puts h in line for Next, in its party's order from now. ready
// false keeps it from starting until Ready (its Keys are not known yet).
func (s *Scheduler) Enqueue(h Holder, ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.held[h.Key]; !held {
		s.waitLocked(h).ready = ready
	}
}

// Ready lets key, in line, start; keys are what it counts against.
func (s *Scheduler) Ready(key string, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.waiters[key]; ok {
		w.Keys, w.ready = keys, true
	}
}

// Next takes a slot for the key in line that goes next, if any may start:
// the first party in turn under its bounds with a ready key under its
// keys' bounds starts its oldest such key and goes to the back of the
// turns.
func (s *Scheduler) Next() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	others := s.holdersLocked("")
	if s.o.Total > 0 && len(others) >= s.o.Total {
		return "", false
	}
	party, keys := tally(others)
	for i, p := range s.turns {
		if s.o.PerParty > 0 && party[p] >= s.o.PerParty {
			continue
		}
		j := slices.IndexFunc(s.waiting[p], func(w *waiter) bool { return w.ready && !s.keyFull(w.Keys, keys) })
		if j < 0 {
			continue
		}
		w := s.waiting[p][j]
		s.turns = append(slices.Delete(s.turns, i, i+1), p)
		s.holdLocked(w.Holder)
		return w.Key, true
	}
	return "", false
}

// Len is how many slots are held here and how many keys wait.
func (s *Scheduler) Len() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held), len(s.waiters)
}

// Reset forgets every slot and waiter: a new leadership term counts
// afresh (Adopt).
func (s *Scheduler) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.held)
	clear(s.waiters)
	clear(s.waiting)
	s.turns = nil
}

// tally counts holders per party and per key.
func tally(hs []Holder) (party, keys map[string]int) {
	party, keys = map[string]int{}, map[string]int{}
	for _, h := range hs {
		party[h.Party]++
		for _, k := range h.Keys {
			keys[k]++
		}
	}
	return party, keys
}

// keysOf lists the holders' keys, of party only unless it is "".
func keysOf(hs []Holder, party string) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		if party == "" || h.Party == party {
			out = append(out, h.Key)
		}
	}
	return out
}
