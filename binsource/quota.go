package binsource

import (
	"context"
	"slices"
	"strings"

	"github.com/object-store-operator/operator/binstore"
)

// Quotas bound what tenants make the store hold, so one cannot fill the
// volume (and have every replica evicted). A unit is charged for the bytes
// its ObjectStores reference and for every binary its pulls landed until
// it is removed (binstore.Source.LandedFor, kept across restarts), so
// churn frees nothing; bytes two units reference count in each. Only a
// pull that would land is checked, and nothing stored is removed to make
// room: the tenant is told StoreFull.

// unitKey carries the unit a pull runs for to its commits.
type unitKey struct{}

func withUnit(ctx context.Context, unit string) context.Context {
	return context.WithValue(ctx, unitKey{}, unit)
}

func unitOf(ctx context.Context) string {
	unit, _ := ctx.Value(unitKey{}).(string)
	return unit
}

// references is one ObjectStore's unit and its binaries' sizes.
type references struct {
	unit     string
	binaries map[string]int64
}

func binaryKey(platform, sha string) string { return platform + "/" + sha }

func (f *Fetcher) reference(key, unit string, binaries []*binstore.Binary) {
	refs := references{unit: unit, binaries: map[string]int64{}}
	for _, b := range binaries {
		refs.binaries[binaryKey(b.Platform, b.SHA256)] = b.Size
	}
	f.mu.Lock()
	f.refs[key] = refs
	f.mu.Unlock()
}

func (f *Fetcher) unreference(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.refs, key)
}

// unitUsage returns the distinct bytes the unit is charged for, and which.
func (f *Fetcher) unitUsage(unit string) (int64, map[string]bool) {
	seen := map[string]bool{}
	var total int64
	add := func(k string, size int64) {
		if !seen[k] {
			seen[k] = true
			total += size
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// What another unit references now is its, not the lander's.
	others := map[string]bool{}
	for _, r := range f.refs {
		if r.unit != unit {
			for k := range r.binaries {
				others[k] = true
			}
		}
	}
	for _, b := range f.cfg.Store.Current().All() {
		if k := binaryKey(b.Platform, b.SHA256); b.Source != nil && b.Source.LandedFor == unit && !others[k] {
			add(k, b.Size)
		}
	}
	for _, r := range f.refs {
		if r.unit == unit {
			for k, size := range r.binaries {
				add(k, size)
			}
		}
	}
	return total, seen
}

// admit checks a staged binary against the quotas; the caller holds
// quotaMu until it landed, so two cannot both fit the last free bytes.
func (f *Fetcher) admit(unit, platform, release string, staged *binstore.Staged) error {
	k := binaryKey(platform, staged.SHA256)
	snap := f.cfg.Store.Current()
	stored := slices.ContainsFunc(snap.All(), func(b *binstore.Binary) bool { return b.Platform == platform && b.SHA256 == staged.SHA256 })
	if max := f.cfg.StoreMaxBytes; max > 0 && !stored {
		if used := snap.StoredBytes(); used+staged.Size > max {
			return reasonf(errStoreFull, "minio.%s for %s (%d bytes) does not fit: the store holds %d bytes of its limit of %d bytes; nothing stored was removed for it",
				release, platform, staged.Size, used, max)
		}
	}
	if max := f.cfg.NamespaceMaxBytes; max > 0 && unit != "" {
		used, has := f.unitUsage(unit)
		if !has[k] && used+staged.Size > max {
			return reasonf(errStoreFull, "minio.%s for %s (%d bytes) does not fit: %s use %d bytes of its share of %d bytes (what they reference, and what their pulls landed until housekeeping removes it); nothing stored was removed for it",
				release, platform, staged.Size, describeUnit(unit), used, max)
		}
	}
	return nil
}

// describeUnit names a unit (tenant.Resolver.Unit) for a message.
func describeUnit(unit string) string {
	if t, ok := strings.CutPrefix(unit, "tenant:"); ok {
		return "tenant " + t + "'s ObjectStores"
	}
	if strings.Contains(unit, "/") {
		return "ObjectStore " + unit + " and its pulls"
	}
	return "namespace " + unit + "'s ObjectStores"
}
