package main

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func sts(ns, name string, lbl map[string]string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}}
}

func TestNamespacedInformersSeeOnlyTheirNamespaces(t *testing.T) {
	client := fake.NewClientset(
		sts("a", "one", map[string]string{"store": "x"}), sts("a", "two", nil),
		sts("b", "one", map[string]string{"store": "x"}), sts("c", "one", map[string]string{"store": "x"}),
	)
	var lists []string
	var mu sync.Mutex
	client.PrependReactor("list", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		lists = append(lists, a.GetNamespace())
		mu.Unlock()
		return false, nil, nil
	})
	inf := newNamespacedInformers([]string{"a", "b"}, func(ns string) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns)).Apps().V1().StatefulSets().Informer()
	})
	var added []string
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		added = append(added, key)
	}})
	require.NoError(t, err)
	require.NoError(t, inf.AddIndexers(cache.Indexers{"store": func(obj any) ([]string, error) {
		return []string{obj.(*appsv1.StatefulSet).Labels["store"]}, nil
	}}))
	go inf.RunWithContext(t.Context())
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced, reg.HasSynced))

	keys := inf.GetIndexer().ListKeys()
	slices.Sort(keys)
	assert.Equal(t, []string{"a/one", "a/two", "b/one"}, keys)
	mu.Lock()
	slices.Sort(added)
	assert.Equal(t, keys, added, "the handler hears every watched namespace")
	slices.Sort(lists)
	assert.Equal(t, []string{"a", "b"}, lists, "nothing is listed cluster-wide")
	mu.Unlock()

	_, ok, err := inf.GetIndexer().GetByKey("c/one")
	require.NoError(t, err)
	assert.False(t, ok, "an unwatched namespace is not seen")
	obj, ok, err := inf.GetIndexer().GetByKey("b/one")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b", obj.(*appsv1.StatefulSet).Namespace)

	byStore, err := inf.GetIndexer().IndexKeys("store", "x")
	require.NoError(t, err)
	slices.Sort(byStore)
	assert.Equal(t, []string{"a/one", "b/one"}, byStore, "an index spans the namespaces")

	lister := statefulSetInformer{inf}.Lister()
	got, err := lister.StatefulSets("a").List(labels.SelectorFromSet(labels.Set{"store": "x"}))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "one", got[0].Name)
	got, err = lister.StatefulSets("c").List(labels.Everything())
	require.NoError(t, err)
	assert.Empty(t, got)

	assert.Error(t, inf.GetIndexer().Add(sts("a", "three", nil)), "the store is the informers' own")

	select {
	case <-inf.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sync checker never finished")
	}
}

func TestOneNamespaceIsThePlainInformer(t *testing.T) {
	client := fake.NewClientset()
	plain := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("a")).Apps().V1().StatefulSets().Informer()
	got := newNamespacedInformers([]string{"a"}, func(string) cache.SharedIndexInformer { return plain })
	assert.Same(t, plain, got)
}
