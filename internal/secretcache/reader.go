// Package secretcache reads the Secrets ObjectStores reference, for every
// controller, without caching every Secret of the cluster.
package secretcache

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Reader reads the Secrets ObjectStores reference without caching
// every Secret of the cluster. A metadata-only informer (see
// TrimMetadata) tells which Secrets exist and their resource
// versions; data is fetched with a GET for the Secrets a sync asks for and
// kept while the resource version stays. Memory grows with what tenants
// reference, not with Helm release Secrets and the like: once tracking
// (Track), only a Secret some ObjectStore references is kept, and it is
// dropped when the last one stops referencing it.
type Reader struct {
	meta   cache.Indexer // *metav1.PartialObjectMetadata
	client kubernetes.Interface
	// digest sums a Secret's data for the metadata view (Digest).
	digest func(map[string][]byte) string
	// reads shares one GET among the syncs that want the same version of
	// a Secret: a CA shared by a namespace's ObjectStores changes, and
	// every one of them is queued at once.
	reads singleflight.Group

	// stores is the ObjectStores' indexer once Track was called: a Secret
	// no ObjectStore references is read, not kept.
	stores cache.Indexer

	limits Limits

	mu   sync.Mutex
	data map[viewKey]cachedSecret
	// kept is the bytes of data kept, by tenant and in all.
	kept      map[string]int64
	keptTotal int64
}

// Limits bound the Secret data a Reader keeps. A tenant chooses how much
// it stores in Secrets and names from its ObjectStores (145 Secrets of up
// to 1 MiB each per ObjectStore, as many ObjectStores as it likes):
// without a bound it chose how much of the operator's memory it held, and
// could take it down for every tenant; with a bound per tenant only, many
// tenants (or one with many namespaces) still could. Beyond a bound,
// Secrets are read from the apiserver each time, not kept. A tenant's
// configuration, certificates and CAs are a few KiB each.
type Limits struct {
	// PerTenant bounds what one tenant's Secrets keep (0: no bound).
	PerTenant int64
	// Total bounds what all Secrets keep (0: no bound).
	Total int64
	// TenantOf names the tenant of a namespace (nil: the namespace).
	TenantOf func(namespace string) string
}

// referencesIndex files an ObjectStore under every Secret it references
// (Track).
const referencesIndex = "secretcache.references"

// Track keeps only the data of Secrets that objects of stores reference:
// refs is an index function returning the namespace/name of every Secret
// an object references. What a Secret no object references any more
// holds is dropped when the last one changes its references or goes.
// Call it before stores runs.
func (r *Reader) Track(stores cache.SharedIndexInformer, refs cache.IndexFunc) error {
	if err := stores.AddIndexers(cache.Indexers{referencesIndex: refs}); err != nil {
		return fmt.Errorf("index ObjectStores by the Secrets they reference: %w", err)
	}
	r.stores = stores.GetIndexer()
	// The informer updates its indexer before it calls handlers: a
	// reference gone is gone from the index here.
	forget := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		keys, err := refs(obj)
		if err != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, key := range keys {
			if !r.referenced(key) {
				r.dropLocked(key)
			}
		}
	}
	_, err := stores.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			// References are in the spec: a status write changes none.
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			if err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration() {
				forget(old)
			}
		},
		DeleteFunc: forget,
	})
	if err != nil {
		return fmt.Errorf("Secret cache ObjectStore handler: %w", err)
	}
	return nil
}

// referenced reports whether some object references the Secret key
// (always, untracked).
func (r *Reader) referenced(key string) bool {
	if r.stores == nil {
		return true
	}
	refs, err := r.stores.IndexKeys(referencesIndex, key)
	return err == nil && len(refs) > 0
}

// viewKey names one view of a Secret: with its data (a referenced
// Secret), or its metadata and digest (a generated one). A generated
// Secret can also be referenced as an input; each view is kept apart, so
// neither answers for the other.
type viewKey struct {
	key  string // namespace/name
	data bool
}

type cachedSecret struct {
	resourceVersion string
	// secret holds the data of a referenced Secret (with only the
	// metadata assemble needs), or the metadata of a generated Secret
	// without its data: for those the controller compares digest only.
	secret *corev1.Secret
	digest string // contentHash of the data, in the metadata view only
	size   int64  // bytes of data kept (the data view)
	// tenant is whom size was counted against (a namespace's tenant can
	// change while it is kept).
	tenant string
}

// NewReader reads data through client for the Secrets meta (a
// metadata-only informer's indexer, see TrimMetadata) holds; digest sums
// a Secret's data for Digest.
func NewReader(meta cache.Indexer, client kubernetes.Interface, digest func(map[string][]byte) string, limits Limits) *Reader {
	if limits.TenantOf == nil {
		limits.TenantOf = func(namespace string) string { return namespace }
	}
	return &Reader{meta: meta, client: client, digest: digest, limits: limits, data: map[viewKey]cachedSecret{}, kept: map[string]int64{}}
}

// Get returns the Secret namespace/name with its data, as the informer
// last saw it: from memory when its resource version is the one kept,
// else from the apiserver. The result is shared: callers must not modify
// it.
func (r *Reader) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	c, err := r.lookup(ctx, namespace, name, true)
	return c.secret, err
}

// Digest returns the Secret namespace/name without its data, and the
// digest of its data: what the controller needs of the Secrets it
// generates. The Secret is shared: callers must not modify it.
func (r *Reader) Digest(ctx context.Context, namespace, name string) (*corev1.Secret, string, error) {
	c, err := r.lookup(ctx, namespace, name, false)
	return c.secret, c.digest, err
}

func (r *Reader) lookup(ctx context.Context, namespace, name string, data bool) (cachedSecret, error) {
	key := namespace + "/" + name
	obj, exists, err := r.meta.GetByKey(key)
	if err != nil {
		return cachedSecret{}, fmt.Errorf("look up Secret %s: %w", key, err)
	}
	if !exists {
		return cachedSecret{}, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return cachedSecret{}, fmt.Errorf("look up Secret %s: unexpected %T in the cache", key, obj)
	}
	r.mu.Lock()
	c, ok := r.data[viewKey{key, data}]
	r.mu.Unlock()
	if ok && c.resourceVersion == m.GetResourceVersion() {
		return c, nil
	}
	// Keyed by the version wanted: a GET that started before this
	// version existed must not answer for it.
	v, err, _ := r.reads.Do(fmt.Sprintf("%s@%s@%t", key, m.GetResourceVersion(), data), func() (any, error) {
		s, err := r.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Remember(s, data), nil
	})
	if err != nil {
		return cachedSecret{}, err
	}
	return v.(cachedSecret), nil
}

// Remember keeps s (when some ObjectStore references it, once
// tracking), as read or as written by a controller: with its
// data and the little metadata assemble reads, or (data false) with its
// metadata and the digest of its data. Annotations of a referenced Secret
// are dropped: kubectl's last-applied-configuration repeats its data. A
// version newer than the informer's is fetched once more when the
// informer catches up: harmless.
func (r *Reader) Remember(s *corev1.Secret, data bool) cachedSecret {
	c := cachedSecret{resourceVersion: s.ResourceVersion}
	if data {
		c.secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion},
			Type:       s.Type, Data: s.Data,
		}
		for k, v := range s.Data {
			c.size += int64(len(k) + len(v))
		}
	} else {
		c.digest = r.digest(s.Data)
		slim := *s
		slim.ManagedFields, slim.Data, slim.StringData = nil, nil, nil
		c.secret = &slim
	}
	key := s.Namespace + "/" + s.Name
	r.mu.Lock()
	// Checked under the lock the forgetting handler holds: a reference
	// dropped after this check is forgotten by that handler.
	if r.referenced(key) {
		vk := viewKey{key, data}
		tenant := r.limits.TenantOf(s.Namespace)
		old := r.data[vk]
		tenantGrow := c.size
		if old.tenant == tenant {
			// Replacing what the same tenant kept (a relabelled namespace
			// counts it afresh against its new tenant).
			tenantGrow -= old.size
		}
		if over(r.kept[tenant]+tenantGrow, r.limits.PerTenant) || over(r.keptTotal+c.size-old.size, r.limits.Total) {
			// Over the tenant's share or the total: read each time, not
			// kept (an older version kept would answer for nothing).
			r.setLocked(vk, cachedSecret{}, false)
		} else {
			r.setLocked(vk, c, true)
		}
	}
	r.mu.Unlock()
	return c
}

func over(n, limit int64) bool { return limit > 0 && n > limit }

// setLocked keeps c as vk (keep), or drops vk, counting the bytes kept.
func (r *Reader) setLocked(vk viewKey, c cachedSecret, keep bool) {
	if old, ok := r.data[vk]; ok {
		r.count(old.tenant, -old.size)
		delete(r.data, vk)
	}
	if keep {
		ns, _, _ := strings.Cut(vk.key, "/")
		c.tenant = r.limits.TenantOf(ns)
		r.data[vk] = c
		r.count(c.tenant, c.size)
	}
}

func (r *Reader) count(tenant string, n int64) {
	r.keptTotal += n
	if r.kept[tenant] += n; r.kept[tenant] == 0 {
		delete(r.kept, tenant)
	}
}

// dropLocked drops both views of the Secret key.
func (r *Reader) dropLocked(key string) {
	r.setLocked(viewKey{key, true}, cachedSecret{}, false)
	r.setLocked(viewKey{key, false}, cachedSecret{}, false)
}

// Forget drops what is kept for namespace/name: the Secret was deleted,
// or no ObjectStore references it any more.
func (r *Reader) Forget(key string) {
	r.mu.Lock()
	r.dropLocked(key)
	r.mu.Unlock()
}

// KeptBytes is how many bytes of Secret data are held in memory.
func (r *Reader) KeptBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keptTotal
}

// Kept is how many Secret views are held in memory.
func (r *Reader) Kept() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.data)
}

// TrimMetadata is the transform for the metadata-only Secret informer.
// The controllers read names, resource versions and owner
// references from it, nothing else: managed fields, labels and
// annotations go (for a Secret applied with kubectl, an annotation holds
// the whole Secret: kubectl.kubernetes.io/last-applied-configuration).
func TrimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields, m.Labels, m.Annotations = nil, nil, nil
	}
	return obj, nil
}
