package mountsecret

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// secretReader reads the Secrets ObjectStores reference without caching
// every Secret of the cluster. A metadata-only informer (see
// TrimSecretMetadata) tells which Secrets exist and their resource
// versions; data is fetched with a GET for the Secrets a sync asks for and
// kept while the resource version stays. Memory grows with what tenants
// reference, not with Helm release Secrets and the like.
type secretReader struct {
	meta   cache.Indexer // *metav1.PartialObjectMetadata
	client kubernetes.Interface

	mu   sync.Mutex
	data map[string]cachedSecret // namespace/name
}

type cachedSecret struct {
	resourceVersion string
	secret          *corev1.Secret
}

func newSecretReader(meta cache.Indexer, client kubernetes.Interface) *secretReader {
	return &secretReader{meta: meta, client: client, data: map[string]cachedSecret{}}
}

// Get returns the Secret namespace/name as the informer last saw it: from
// memory when its resource version is the one kept, else from the
// apiserver. The result is shared: callers must not modify it.
func (r *secretReader) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	key := namespace + "/" + name
	obj, exists, err := r.meta.GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("look up Secret %s: %w", key, err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("look up Secret %s: unexpected %T in the cache", key, obj)
	}
	r.mu.Lock()
	c, ok := r.data[key]
	r.mu.Unlock()
	if ok && c.resourceVersion == m.GetResourceVersion() {
		return c.secret, nil
	}
	s, err := r.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	r.remember(s)
	return s, nil
}

// remember keeps s, as read or as written by the controller. A version
// newer than the informer's is fetched once more when the informer
// catches up: harmless.
func (r *secretReader) remember(s *corev1.Secret) {
	s.ManagedFields = nil
	r.mu.Lock()
	r.data[s.Namespace+"/"+s.Name] = cachedSecret{resourceVersion: s.ResourceVersion, secret: s}
	r.mu.Unlock()
}

// forget drops what is kept for namespace/name: the Secret was deleted,
// or no ObjectStore references it any more.
func (r *secretReader) forget(key string) {
	r.mu.Lock()
	delete(r.data, key)
	r.mu.Unlock()
}

// kept is how many Secrets' data is held in memory.
func (r *secretReader) kept() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.data)
}

// TrimSecretMetadata is the transform for the metadata-only Secret
// informer: besides managed fields it drops annotations, which for a
// Secret applied with kubectl hold the whole Secret
// (kubectl.kubernetes.io/last-applied-configuration). The controller reads
// names, resource versions and owner references from it, nothing else.
func TrimSecretMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields = nil
		m.Annotations = nil
	}
	return obj, nil
}
