package testutil

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// SyncedInformer is an ObjectStore informer that is never started and
// reports itself synced: a test fills its cache with GetIndexer().Add and
// runs controllers that wait for their caches.
func SyncedInformer() cache.SharedIndexInformer {
	return syncedInformer{cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})}
}

type syncedInformer struct{ cache.SharedIndexInformer }

func (syncedInformer) HasSynced() bool { return true }
