package binsource

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/object-store-operator/operator/binstore"
)

// wanted is what the ObjectStores' last syncs resolved to.
type wanted struct {
	releases, pairs, published map[string]bool
}

// collector removes binaries no ObjectStore wants once they stayed
// unreferenced for grace, unless they are a rollback target: older than a
// release wanted, with fewer than keep newer releases on their platform.
// A release newer than everything wanted is no rollback target, so a name
// made up to sort last goes like any other. Syncs only kick it.
type collector struct {
	store *binstore.Store
	keep  int
	grace time.Duration
	clock clock.WithDelayedExecution
	log   zerolog.Logger
	wants func() (wanted, bool)
	kick  chan struct{}

	mu           sync.Mutex
	unreferenced map[string]time.Time // URL path -> first seen unreferenced
	timer        clock.Timer
}

func newCollector(store *binstore.Store, keep int, grace time.Duration, clk clock.WithDelayedExecution, log zerolog.Logger,
	wants func() (wanted, bool)) *collector {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &collector{store: store, keep: keep, grace: grace, clock: clk, log: log, wants: wants,
		kick: make(chan struct{}, 1), unreferenced: map[string]time.Time{}}
}

func (g *collector) Kick() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Run collects on every kick until ctx ends.
func (g *collector) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
			g.collect()
		}
	}
}

// collect removes what is unwanted, old enough and past its grace.
func (g *collector) collect() {
	want, known := g.wants()
	if !known {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	snap := g.store.Current()
	now := g.clock.Now()
	next := time.Duration(math.MaxInt64) // until the first grace ends
	rank := newerReleases(snap, now)
	newestWanted := ""
	for r := range want.releases {
		newestWanted = max(newestWanted, r)
	}
	unreferenced := map[string]time.Time{}
	for _, b := range snap.All() {
		if b.Platform == "" {
			continue
		}
		newer := rank[b.Platform+"/"+b.Release]
		if b.Release >= newestWanted {
			// Not a rollback target: nothing wanted is newer.
			newer = g.keep
		}
		keep := want.pairs[b.SHA256+"/"+b.Release]
		if b.Path() == b.PlainPath() {
			keep = want.releases[b.Release]
		}
		// A view goes as soon as its ObjectStore no longer wants it.
		if b.Published() {
			keep, newer = want.published[b.URLPath()], g.keep
		}
		if keep || newer < g.keep {
			continue
		}
		since, seen := g.unreferenced[b.URLPath()]
		if !seen {
			since = now
		}
		if left := g.grace - now.Sub(since); left > 0 {
			unreferenced[b.URLPath()] = since
			next = min(next, left)
			continue
		}
		if err := g.store.RemoveBinary(b); err != nil {
			g.log.Warn().Err(err).Str("file", b.URLPath()).Str("release", b.Release).Msg("could not remove an unreferenced binary")
			continue
		}
		g.log.Info().Str("file", b.URLPath()).Str("release", b.Release).Str("sha256", b.SHA256).Int("newer", newer).Int("keep", g.keep).
			Stringer("grace", g.grace).Msg("removed a binary no ObjectStore references (unreferenced for the grace, and enough newer releases exist)")
	}
	g.unreferenced = unreferenced
	if next != time.Duration(math.MaxInt64) {
		if g.timer != nil {
			g.timer.Stop()
		}
		g.timer = g.clock.AfterFunc(next, g.Kick)
	}
}

// newerReleases ranks each "<platform>/<release>" by how many newer ones
// the store holds. Only names of a release time not after now count: any
// tenant names its image's release, and made-up names would otherwise
// push every tenant's rollback targets out.
func newerReleases(snap *binstore.Snapshot, now time.Time) map[string]int {
	byPlatform := map[string][]string{}
	for _, b := range snap.All() {
		at, ok := releaseTime(b.Release)
		if !ok || at.After(now) {
			continue
		}
		if b.Platform != "" && !slices.Contains(byPlatform[b.Platform], b.Release) {
			byPlatform[b.Platform] = append(byPlatform[b.Platform], b.Release)
		}
	}
	rank := map[string]int{}
	for platform, rels := range byPlatform {
		sort.Sort(sort.Reverse(sort.StringSlice(rels)))
		for i, r := range rels {
			rank[platform+"/"+r] = i
		}
	}
	return rank
}
