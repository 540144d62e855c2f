package binsource

import (
	"context"

	"github.com/object-store-operator/operator/binstore"
)

// Quotas bound what the tenants make the store hold, so one tenant cannot
// fill the store volume (and have the kubelet evict every replica):
//   - the store's limit (FetcherConfig.StoreMaxBytes) on the distinct
//     bytes stored (each SHA-256 and platform once, however many release
//     names and ObjectStores point at it);
//   - a namespace's share (FetcherConfig.NamespaceMaxBytes) on the
//     distinct bytes its ObjectStores reference. Bytes two namespaces
//     both reference count in each (each could have made the store hold
//     them), once within one.
//
// Only a pull that would land bytes not stored yet is checked: bytes
// already stored cost the store nothing more, and nothing already stored
// is removed to make room (the tenant that asked is told StoreFull).
// Binaries nobody references any more are removed by housekeeping after
// its grace, which frees the store's limit; a namespace's share is freed
// as soon as its ObjectStores no longer reference the bytes.

// namespaceKey carries the namespace a pull runs for to its commits.
type namespaceKey struct{}

func withNamespace(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, namespaceKey{}, ns)
}

func namespaceOf(ctx context.Context) string {
	ns, _ := ctx.Value(namespaceKey{}).(string)
	return ns
}

// references is what one ObjectStore references: its namespace and its
// binaries' sizes by <platform>/<sha256>.
type references struct {
	namespace string
	binaries  map[string]int64
}

func binaryKey(platform, sha string) string { return platform + "/" + sha }

// reference records the binaries the ObjectStore key (of namespace ns)
// is served; they count in the namespace's share. Binaries landed for the
// namespace and not referenced yet stop counting as pending.
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
// reference (and pulls for it landed since), and which binaries they are.
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
	stored := false
	for _, b := range snap.All() {
		if b.Platform == platform && b.SHA256 == staged.SHA256 {
			stored = true
			break
		}
	}
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
