package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

// Informer is a shared informer of obj's type that is never started: its
// indexer is filled by hand.
func Informer(obj runtime.Object) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(&cache.ListWatch{}, obj, 0, cache.Indexers{})
}

// Lead runs lead in the background for the rest of the test and returns
// once leading reports the term has begun.
func Lead(t testing.TB, lead func(context.Context), leading func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lead(ctx)
	require.Eventually(t, leading, time.Second, time.Millisecond)
}
