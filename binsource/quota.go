package binsource

import (
	"context"
	"slices"

	"github.com/object-store-operator/operator/binstore"
)

// Quotas bound what tenants make the store hold, so one cannot fill the
// volume (and have the kubelet evict every replica): StoreMaxBytes the
// distinct bytes stored (each SHA-256 and platform once), and
// NamespaceMaxBytes those a namespace's ObjectStores reference (bytes two
// namespaces reference count in each, since each could have made the
// store hold them). Only a pull that would land new bytes is checked, and
// nothing stored is removed to make room: the tenant is told StoreFull.
// A namespace's share frees as soon as it no longer references the bytes,
// the store's once housekeeping removed them.

// namespaceKey carries the namespace a pull runs for to its commits.
type namespaceKey struct{}

func withNamespace(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, namespaceKey{}, ns)
}

func namespaceOf(ctx context.Context) string {
	ns, _ := ctx.Value(namespaceKey{}).(string)
	return ns
}

// references is one ObjectStore's namespace and its binaries' sizes, by
// binaryKey.
type references struct {
	namespace string
	binaries  map[string]int64
}

func binaryKey(platform, sha string) string { return platform + "/" + sha }

// reference records the binaries the ObjectStore key (of namespace ns)
// is served, in the place of what was landed for the namespace since.
func (f *Fetcher) reference(key, ns string, binaries []*binstore.Binary) {
	refs := references{namespace: ns, binaries: map[string]int64{}}
	for _, b := range binaries {
		refs.binaries[binaryKey(b.Platform, b.SHA256)] = b.Size
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs[key] = refs
	delete(f.pending, ns)
}

// unreference forgets what the ObjectStore key referenced.
func (f *Fetcher) unreference(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.refs, key)
}

// namespaceUsage returns the distinct bytes the namespace's ObjectStores
// reference (and its pulls landed since), and which binaries they are.
func (f *Fetcher) namespaceUsage(ns string) (int64, map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var total int64
	add := func(k string, size int64) {
		if !seen[k] {
			seen[k] = true
			total += size
		}
	}
	for _, r := range f.refs {
		if r.namespace == ns {
			for k, size := range r.binaries {
				add(k, size)
			}
		}
	}
	for k, size := range f.pending[ns] {
		add(k, size)
	}
	return total, seen
}

// admit checks a staged binary against the quotas before it lands for
// namespace ns. The caller holds quotaMu until it has landed, so two
// landings cannot both fit into the last free bytes.
func (f *Fetcher) admit(ns, platform, release string, staged *binstore.Staged) error {
	k := binaryKey(platform, staged.SHA256)
	snap := f.cfg.Store.Current()
	stored := slices.ContainsFunc(snap.All(), func(b *binstore.Binary) bool { return b.Platform == platform && b.SHA256 == staged.SHA256 })
	if max := f.cfg.StoreMaxBytes; max > 0 && !stored {
		if used := snap.StoredBytes(); used+staged.Size > max {
			return reasonf(errStoreFull, "minio.%s for %s (%d bytes) does not fit: the store holds %d bytes of its limit of %d bytes; nothing stored was removed for it",
				release, platform, staged.Size, used, max)
		}
	}
	if max := f.cfg.NamespaceMaxBytes; max > 0 && ns != "" {
		used, has := f.namespaceUsage(ns)
		if !has[k] && used+staged.Size > max {
			return reasonf(errStoreFull, "minio.%s for %s (%d bytes) does not fit: namespace %s's ObjectStores use %d bytes of its share of %d bytes; nothing stored was removed for it",
				release, platform, staged.Size, ns, used, max)
		}
	}
	return nil
}

// landedFor counts a binary just landed for namespace ns until one of its
// ObjectStores references it (reference).
func (f *Fetcher) landedFor(ns string, b *binstore.Binary) {
	if ns == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending[ns] == nil {
		f.pending[ns] = map[string]int64{}
	}
	f.pending[ns][binaryKey(b.Platform, b.SHA256)] = b.Size
}
