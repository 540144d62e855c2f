package secretcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	v1 "github.com/object-store-operator/operator/api/v1"
)

// readerFixture is a Reader over a fake apiserver whose metadata
// indexer the test moves by hand, as the informer would.
type readerFixture struct {
	t      *testing.T
	client *fake.Clientset
	meta   cache.Indexer
	r      *Reader
}

func newReaderFixture(t *testing.T) *readerFixture {
	f := &readerFixture{t: t, client: fake.NewClientset(), meta: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	f.r = NewReader(f.meta, f.client, contentHash, Limits{PerTenant: 16 << 20, Total: 40 << 20})
	return f
}

// put writes s to the apiserver and its metadata to the informer.
func (f *readerFixture) put(s *corev1.Secret) {
	f.t.Helper()
	s.ResourceVersion = ""
	got, err := f.client.CoreV1().Secrets(s.Namespace).Get(context.Background(), s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = f.client.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	} else {
		s.ResourceVersion = got.ResourceVersion
		_, err = f.client.CoreV1().Secrets(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	}
	require.NoError(f.t, err)
	got, err = f.client.CoreV1().Secrets(s.Namespace).Get(context.Background(), s.Name, metav1.GetOptions{})
	require.NoError(f.t, err)
	// The fake apiserver keeps no resource versions: number them.
	got.ResourceVersion = s.Name + "-" + string(got.Data["v"])
	_, err = f.client.CoreV1().Secrets(s.Namespace).Update(context.Background(), got, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, f.meta.Add(&metav1.PartialObjectMetadata{ObjectMeta: got.ObjectMeta}))
}

func (f *readerFixture) gets() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

func TestSecretReaderFetchesEachVersionOnce(t *testing.T) {
	f := newReaderFixture(t)
	f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "t",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...the data again...}"}},
		Data: map[string][]byte{"v": []byte("1")}})
	f.client.ClearActions()

	for range 3 {
		s, err := f.r.Get(context.Background(), "t", "ca")
		require.NoError(t, err)
		assert.Equal(t, "1", string(s.Data["v"]))
		assert.Empty(t, s.Annotations, "annotations of a referenced Secret are not kept")
	}
	assert.Equal(t, 1, f.gets(), "one GET while the resource version stays")

	f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "t"}, Data: map[string][]byte{"v": []byte("2")}})
	f.client.ClearActions()
	s, err := f.r.Get(context.Background(), "t", "ca")
	require.NoError(t, err)
	assert.Equal(t, "2", string(s.Data["v"]))
	assert.Equal(t, 1, f.gets(), "a new version is fetched")
	assert.Equal(t, 1, f.r.Kept())

	f.r.Forget("t/ca")
	assert.Zero(t, f.r.Kept())
}

func TestSecretReaderDigestKeepsNoData(t *testing.T) {
	f := newReaderFixture(t)
	data := map[string][]byte{"v": []byte("1"), "tls.key": []byte("secret")}
	f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-generated", Namespace: "t",
		Annotations: map[string]string{"aistor.min.io/content-hash": "h"}}, Data: data})

	s, digest, err := f.r.Digest(context.Background(), "t", "s-generated")
	require.NoError(t, err)
	assert.Nil(t, s.Data, "a generated Secret is kept without its data")
	assert.Equal(t, "h", s.Annotations["aistor.min.io/content-hash"], "its annotations are kept: the controller compares them")
	assert.Equal(t, contentHash(data), digest)

	f.client.ClearActions()
	full, err := f.r.Get(context.Background(), "t", "s-generated")
	require.NoError(t, err)
	assert.Equal(t, data, full.Data, "asked for data, the reader fetches it")
	assert.Equal(t, 1, f.gets())

	// A generated Secret that another ObjectStore references as an input:
	// the data view never answers for the metadata view.
	f.client.ClearActions()
	again, digest, err := f.r.Digest(context.Background(), "t", "s-generated")
	require.NoError(t, err)
	assert.Equal(t, "h", again.Annotations["aistor.min.io/content-hash"])
	assert.Equal(t, contentHash(data), digest)
	assert.Zero(t, f.gets(), "both views are kept")
}

func TestSecretReaderSaysNotFoundFromTheInformer(t *testing.T) {
	f := newReaderFixture(t)
	_, err := f.r.Get(context.Background(), "t", "missing")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Empty(t, f.client.Actions(), "no GET for a Secret the informer does not know")
}

func TestTrimMetadataDropsAnnotations(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x",
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "big"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Labels:        map[string]string{"a": "b"}}}
	out, err := TrimMetadata(m)
	require.NoError(t, err)
	got := out.(*metav1.PartialObjectMetadata)
	assert.Nil(t, got.Annotations)
	assert.Nil(t, got.ManagedFields)
	assert.Nil(t, got.Labels)
	assert.Equal(t, "x", got.Name)
}

// contentHash stands in for the mount-secret controller's digest.
func contentHash(data map[string][]byte) string {
	keys := slices.Sorted(maps.Keys(data))
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// objectStore is an ObjectStore in namespace t named name whose spec
// references pull (a pull Secret) and config (its configuration).
func objectStore(name, pull, config string, generation int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": v1.Kind,
		"metadata": map[string]any{"name": name, "namespace": "t", "generation": generation, "resourceVersion": fmt.Sprint(generation)},
		"spec": map[string]any{
			"imagePullSecrets": []any{map[string]any{"name": pull}},
			"configuration":    map[string]any{"name": config},
		},
	}}
}

// TestTrackedReaderKeepsOnlyReferencedSecrets: tracking the ObjectStores,
// the reader keeps a Secret's data while some ObjectStore references it
// (its configuration, pull Secrets, certificates or generated Secret) and
// drops it when the last reference goes; a Secret nobody references is
// read, never kept, so a tenant cannot fill the operator's memory with
// Secrets by naming them once.
func TestTrackedReaderKeepsOnlyReferencedSecrets(t *testing.T) {
	f := newReaderFixture(t)
	source, stores := f.track(t)
	for _, name := range []string{"pull-a", "pull-b", "env", "unrelated"} {
		f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t"}, Data: map[string][]byte{"v": []byte("1")}})
	}
	source.Add(objectStore("a", "pull-a", "env", 1))
	source.Add(objectStore("b", "pull-b", "env", 1))
	require.Eventually(t, func() bool { return len(stores.GetIndexer().ListKeys()) == 2 }, 5*time.Second, time.Millisecond)
	read := func(names ...string) {
		t.Helper()
		for _, name := range names {
			_, err := f.r.Get(context.Background(), "t", name)
			require.NoError(t, err)
		}
	}
	read("pull-a", "pull-b", "env", "unrelated")
	assert.Equal(t, 3, f.r.Kept(), "the three referenced Secrets are kept")
	f.client.ClearActions()
	read("pull-a", "pull-b", "env", "unrelated")
	assert.Equal(t, 1, f.gets(), "only the unreferenced Secret is read again")

	// a stops using pull-a: dropped; env is still b's.
	source.Modify(objectStore("a", "pull-b", "env", 2))
	require.Eventually(t, func() bool { return f.r.Kept() == 2 }, 5*time.Second, time.Millisecond, "pull-a dropped")
	source.Delete(objectStore("a", "pull-b", "env", 2))
	source.Delete(objectStore("b", "pull-b", "env", 1))
	require.Eventually(t, func() bool { return f.r.Kept() == 0 }, 5*time.Second, time.Millisecond, "nothing kept once no ObjectStore references it")
}

// TestOneNamespaceKeepsNoMoreThanItsShareOfSecretData: a tenant stores
// forty Secrets (of 1 MiB; here 64 KiB against a 1 MiB share) and names
// each from an ObjectStore (pull
// Secrets; the CRD lets an ObjectStore name 145 Secrets). Before, the
// reader kept all of them: the tenant chose how much of the operator's
// memory (512 MiB in the chart) it held, and could take it down for
// everyone. A namespace keeps at most Limits.PerTenant bytes; beyond,
// its Secrets are read, not kept, and another namespace's are kept still.
func TestOneNamespaceKeepsNoMoreThanItsShareOfSecretData(t *testing.T) {
	f := newReaderFixture(t)
	source, stores := f.track(t)
	// At a smaller scale than the default share (16 MiB of 1 MiB
	// Secrets): 64 KiB Secrets, 1 MiB a namespace.
	f.r.limits.PerTenant = 1 << 20
	big := make([]byte, 64<<10)
	for i := range 40 {
		name := fmt.Sprintf("pull-%d", i)
		f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t"}, Data: map[string][]byte{"v": []byte("1"), "blob": big}})
		source.Add(objectStore(fmt.Sprintf("s%d", i), name, "env", 1))
	}
	f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "env", Namespace: "u"}, Data: map[string][]byte{"v": []byte("1")}})
	other := objectStore("s", "none", "env", 1)
	other.SetNamespace("u")
	source.Add(other)
	require.Eventually(t, func() bool { return len(stores.GetIndexer().ListKeys()) == 41 }, 5*time.Second, time.Millisecond)
	for i := range 40 {
		s, err := f.r.Get(context.Background(), "t", fmt.Sprintf("pull-%d", i))
		require.NoError(t, err)
		require.Len(t, s.Data["blob"], 64<<10, "every Secret is read whole")
	}
	_, err := f.r.Get(context.Background(), "u", "env")
	require.NoError(t, err)
	assert.LessOrEqual(t, f.r.KeptBytes(), int64(1<<20+1024), "one namespace's 1 MiB, and the other's small Secret")
	f.client.ClearActions()
	_, err = f.r.Get(context.Background(), "u", "env")
	require.NoError(t, err)
	assert.Zero(t, f.gets(), "the other namespace's Secret is kept")
}

// TestManyNamespacesKeepNoMoreThanTheTotal: each namespace within its
// share, but many of them (or one tenant with many namespaces) together
// held what they liked. What is kept in all is bounded too; beyond it,
// Secrets are read, not kept.
func TestManyNamespacesKeepNoMoreThanTheTotal(t *testing.T) {
	f := newReaderFixture(t)
	source, stores := f.track(t)
	// At a smaller scale than the defaults: 64 KiB Secrets, 1 MiB a
	// tenant, 2.5 MiB in all.
	f.r.limits.PerTenant, f.r.limits.Total = 1<<20, 5<<19
	big := make([]byte, 64<<10)
	for n := range 6 {
		for i := range 10 {
			name := fmt.Sprintf("pull-%d", i)
			f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fmt.Sprintf("ns%d", n)}, Data: map[string][]byte{"blob": big}})
			o := objectStore(fmt.Sprintf("s%d", i), name, "env", 1)
			o.SetNamespace(fmt.Sprintf("ns%d", n))
			source.Add(o)
		}
	}
	require.Eventually(t, func() bool { return len(stores.GetIndexer().ListKeys()) == 60 }, 5*time.Second, time.Millisecond)
	for n := range 6 {
		for i := range 10 {
			s, err := f.r.Get(context.Background(), fmt.Sprintf("ns%d", n), fmt.Sprintf("pull-%d", i))
			require.NoError(t, err)
			require.Len(t, s.Data["blob"], 64<<10, "every Secret is read whole")
		}
	}
	assert.LessOrEqual(t, f.r.KeptBytes(), int64(5<<19), "3.75 MiB referenced, each namespace's 640 KiB within its share: 2.5 MiB kept in all")
	assert.Greater(t, f.r.KeptBytes(), int64(2<<20), "what fits is kept")
}

// A tenant label groups namespaces: their Secrets count against one
// share.
func TestNamespacesOfOneTenantShareOneShare(t *testing.T) {
	f := newReaderFixture(t)
	f.r.limits.TenantOf = func(ns string) string { return "acme" }
	f.r.limits.PerTenant = 1 << 20
	for n := range 3 {
		for i := range 10 {
			f.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: fmt.Sprintf("ns%d", n)}, Data: map[string][]byte{"blob": make([]byte, 64<<10)}})
			_, err := f.r.Get(context.Background(), fmt.Sprintf("ns%d", n), fmt.Sprintf("p%d", i))
			require.NoError(t, err)
		}
	}
	assert.LessOrEqual(t, f.r.KeptBytes(), int64(1<<20), "three namespaces of one tenant (1.9 MiB) keep one share")
	assert.Greater(t, f.r.KeptBytes(), int64(900<<10), "what fits is kept")
}

// track has the reader keep only what ObjectStores of the returned
// source reference, through an informer that runs until the test ends.
func (f *readerFixture) track(t *testing.T) (*fcache.FakeControllerSource, cache.SharedIndexInformer) {
	source := fcache.NewFakeControllerSource()
	stores := cache.NewSharedIndexInformer(source, &unstructured.Unstructured{}, 0, cache.Indexers{})
	require.NoError(t, f.r.Track(stores, v1.SecretIndex((*v1.ObjectStore).SecretsRead)))
	go stores.Run(t.Context().Done())
	return source, stores
}
