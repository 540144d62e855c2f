package fairshare

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// woken records the keys a scheduler wakes.
type woken struct{ keys []string }

func (w *woken) wake(k string) { w.keys = append(w.keys, k) }

func (w *woken) take() []string {
	out := w.keys
	w.keys = nil
	return out
}

func h(party, key string, keys ...string) Holder {
	return Holder{Key: party + "/" + key, Party: party, Keys: keys}
}

func TestTheTotalBoundsEveryoneAndAHolderKeepsItsSlot(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	var w woken
	s := New(Options{Total: 2, Wake: w.wake, Clock: clk})
	for _, k := range []string{"1", "2"} {
		ok, _ := s.Acquire(h("a", k), nil)
		require.True(t, ok)
	}
	ok, r := s.Acquire(h("b", "3"), nil)
	assert.False(t, ok)
	assert.Equal(t, Refusal{Why: Full, Holders: []string{"a/1", "a/2"}}, r)
	ok, _ = s.Acquire(h("a", "1"), nil)
	assert.True(t, ok, "a holder keeps the slot it has")
	got, held := s.Holding("a/1")
	require.True(t, held)
	assert.Equal(t, clk.Now(), got.Since)

	assert.Equal(t, 1, s.Release("a/1"), "the waiting key is woken")
	assert.Equal(t, []string{"b/3"}, w.take())
	assert.Zero(t, s.Release("a/1"), "a slot is freed once")
	ok, _ = s.Acquire(h("b", "3"), nil)
	assert.True(t, ok)

	s.Reset()
	for _, k := range []string{"4", "5", "6"} {
		s.Adopt(h("c", k))
	}
	ok, _ = s.Acquire(h("d", "7"), nil)
	assert.False(t, ok, "adopted holders count, beyond the total too")

	unbounded := New(Options{})
	for _, k := range []string{"1", "2", "3"} {
		ok, _ := unbounded.Acquire(h("a", k), nil)
		assert.True(t, ok, "zero: no bound")
	}
}

// A party's own bound wakes only that party's waiters, who leave the line
// and ask again.
func TestAPartyBoundWakesOnlyThatParty(t *testing.T) {
	var w woken
	s := New(Options{PerParty: 1, Wake: w.wake})
	ok, _ := s.Acquire(h("a", "1"), nil)
	require.True(t, ok)
	ok, _ = s.Acquire(h("b", "1"), nil)
	require.True(t, ok, "another party is not held by a's bound")
	ok, r := s.Acquire(h("a", "2"), nil)
	require.False(t, ok)
	assert.Equal(t, Refusal{Why: PartyFull, Holders: []string{"a/1"}}, r)
	ok, _ = s.Acquire(h("b", "2"), nil)
	require.False(t, ok)

	s.Release("b/1")
	assert.Equal(t, []string{"b/2"}, w.take())
	_, waiting := s.Len()
	assert.Equal(t, 1, waiting, "woken, b/2 left the line")
	s.Release("a/1")
	assert.Equal(t, []string{"a/2"}, w.take())
	s.Release("a/1")
	assert.Empty(t, w.take(), "nobody waits any more")
}

func TestAShareBindsWhileAnotherPartyWaits(t *testing.T) {
	// Alone, a party takes every slot; b holding one waits for nothing.
	s := New(Options{Total: 4, Share: true, Wake: func(string) {}})
	for _, k := range []string{"1", "2"} {
		ok, _ := s.Acquire(h("a", k), nil)
		require.True(t, ok)
	}
	ok, _ := s.Acquire(h("b", "1"), nil)
	require.True(t, ok)
	ok, _ = s.Acquire(h("a", "3"), nil)
	assert.True(t, ok, "nobody waits: a takes a third slot of four")

	// While c waits, a (holding three of four) is over its share of two.
	s = New(Options{Total: 4, Share: true, Wake: func(string) {}})
	for _, k := range []string{"1", "2", "3", "4"} {
		ok, _ := s.Acquire(h("a", k), nil)
		require.True(t, ok)
	}
	ok, r := s.Acquire(h("c", "1"), nil)
	require.False(t, ok)
	assert.Equal(t, Full, r.Why)
	s.Release("a/1")
	ok, r = s.Acquire(h("a", "5"), nil)
	assert.False(t, ok)
	assert.Equal(t, Refusal{Why: OverShare, Held: 3, Share: 2, Holders: []string{"a/2", "a/3", "a/4"}}, r)
	ok, _ = s.Acquire(h("c", "1"), nil)
	assert.True(t, ok, "the waiting party takes the slot")
}

// Woken waiters of a share stay in line: they count for the share until
// they take a slot or Unwait.
func TestWaitersOfAShareStayUntilTheyTakeASlotOrUnwait(t *testing.T) {
	var w woken
	s := New(Options{Total: 1, Share: true, Wake: w.wake})
	ok, _ := s.Acquire(h("a", "1"), nil)
	require.True(t, ok)
	s.Wait("b/1", "b")
	ok, _ = s.Acquire(h("c", "1"), nil)
	require.False(t, ok)
	s.Release("a/1")
	assert.Equal(t, []string{"b/1", "c/1"}, w.take())
	_, waiting := s.Len()
	assert.Equal(t, 2, waiting)
	s.Unwait("b/1")
	ok, _ = s.Acquire(h("c", "1"), nil)
	assert.True(t, ok)
	_, waiting = s.Len()
	assert.Zero(t, waiting)
}

// The caller's condition sees the other holders, after the bounds; a
// release wakes the waiting.
func TestTheCallersConditionSeesTheOtherHolders(t *testing.T) {
	held := []Holder{{Key: "x/1", Party: "x", Note: "r1"}, {Key: "y/1", Party: "y", Note: "r2"}}
	var w woken
	s := New(Options{Total: 3, Share: true, Wake: w.wake})
	for _, h := range held {
		ok, _ := s.Acquire(h, nil)
		require.True(t, ok)
	}
	var seen []Holder
	ok, _ := s.Acquire(Holder{Key: "z/1", Party: "z", Note: "r1"}, func(others []Holder) bool { seen = others; return true })
	require.True(t, ok)
	assert.Equal(t, held, stripSince(seen))
	ok, r := s.Acquire(h("z", "2"), nil)
	require.False(t, ok)
	assert.Equal(t, Full, r.Why)
	ok, r = s.Acquire(h("w", "1"), func([]Holder) bool { return false })
	require.False(t, ok)
	assert.Equal(t, Full, r.Why, "the bounds come first")

	assert.Equal(t, held, stripSince(s.Holders("z/1")))
	assert.Equal(t, 2, s.Release("x/1"), "a holder ended")
	ok, r = s.Acquire(h("w", "1"), func([]Holder) bool { return false })
	assert.False(t, ok)
	assert.Equal(t, Refusal{Why: Refused}, r)
	assert.Zero(t, s.Release("nobody"))
}

func stripSince(hs []Holder) []Holder {
	out := make([]Holder, len(hs))
	for i, h := range hs {
		h.Since = time.Time{}
		out[i] = h
	}
	return out
}

// Next hands slots out in turns across parties, oldest first within a
// party, skipping keys not ready or over their keys' bound.
func TestNextServesPartiesInTurnAndKeysWithinTheirBounds(t *testing.T) {
	s := New(Options{Total: 1, PerParty: 1, PerKey: 1})
	s.Enqueue(h("a", "0", "r"), true)
	k, ok := s.Next()
	require.True(t, ok)
	assert.Equal(t, "a/0", k)
	for _, n := range []string{"1", "2", "3"} {
		s.Enqueue(h("a", n, "r"), true)
	}
	s.Enqueue(h("b", "0", "r"), true)
	s.Enqueue(h("c", "0"), false)
	_, ok = s.Next()
	assert.False(t, ok, "the one slot is held")
	s.Release("a/0")
	var order []string
	for {
		k, ok := s.Next()
		if !ok {
			break
		}
		order = append(order, k)
		s.Release(k)
	}
	assert.Equal(t, []string{"a/1", "b/0", "a/2", "a/3"}, order, "c/0 is not ready")
	s.Ready("c/0", []string{"q"})
	k, ok = s.Next()
	assert.True(t, ok)
	assert.Equal(t, "c/0", k)
	s.Release("c/0")

	keyed := New(Options{Total: 4, PerKey: 1})
	keyed.Enqueue(h("a", "0", "r", "s"), true)
	keyed.Enqueue(h("b", "0", "s"), true)
	keyed.Enqueue(h("c", "0", "t"), true)
	var started []string
	for {
		k, ok := keyed.Next()
		if !ok {
			break
		}
		started = append(started, k)
	}
	assert.Equal(t, []string{"a/0", "c/0"}, started, "b/0 shares a key with a/0")
}

// Nothing is kept of a party once its keys left: no count, no line, no
// turn.
func TestNothingIsKeptOnceEveryKeyLeft(t *testing.T) {
	s := New(Options{Total: 1, PerParty: 1, Share: true, Wake: func(string) {}})
	s.Acquire(h("a", "1"), nil)
	s.Acquire(h("b", "1"), nil)
	s.Enqueue(h("c", "1"), false)
	s.Wait("d/1", "d")
	s.Release("a/1")
	s.Unwait("b/1")
	s.Unwait("c/1")
	s.Unwait("d/1")
	assert.Empty(t, s.held)
	assert.Empty(t, s.waiters)
	assert.Empty(t, s.waiting)
	assert.Empty(t, s.turns)
}

func TestWorkFoundRunningIsAdoptedOnlyWithinEachPartysShare(t *testing.T) {
	s := New(Options{Total: 4, Share: true})
	adopted := s.AdoptFound(map[string][]string{
		"forger": {"forger/1", "forger/2", "forger/3", "forger/4", "forger/5"},
		"honest": {"honest/1"},
	}, map[string]string{"honest/1": "what it does"})
	assert.Equal(t, []string{"forger/1", "honest/1", "forger/2"}, adopted,
		"a party that shows many restarts running counts for its share only, the others taking turns")
	h, _ := s.Holding("honest/1")
	assert.Equal(t, "what it does", h.Note, "adopted with its note")
	ok, _ := s.Acquire(Holder{Key: "third/1", Party: "third"}, nil)
	assert.True(t, ok, "what was not adopted leaves a slot for a third party")

	unbounded := New(Options{})
	assert.Len(t, unbounded.AdoptFound(map[string][]string{"a": {"a/1", "a/2"}, "b": {"b/1"}}, nil), 3,
		"without a total everything found is adopted")
}
