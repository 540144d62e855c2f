package tenant

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func namespaces(t *testing.T, labels map[string]map[string]string) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, l := range labels {
		require.NoError(t, idx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}))
	}
	return idx
}

func TestATenantIsTheLabelsValueElseTheNamespace(t *testing.T) {
	idx := namespaces(t, map[string]map[string]string{
		"acme-a": {"platform.example.com/tenant": "acme"},
		"acme-b": {"platform.example.com/tenant": "acme"},
		"solo":   {"other": "x"},
	})
	r := New("platform.example.com/tenant", PerTenant, idx)
	assert.Equal(t, "tenant:acme", r.Of("acme-a"))
	assert.Equal(t, r.Of("acme-a"), r.Unit("acme-b/store"), "two namespaces of one tenant are one unit")
	assert.Equal(t, "solo", r.Of("solo"), "no label: the namespace")
	assert.Equal(t, "gone", r.Of("gone"), "not (yet) seen: the namespace")

	idx2 := namespaces(t, map[string]map[string]string{"tenant:acme": nil, "acme": {"platform.example.com/tenant": "acme"}})
	r2 := New("platform.example.com/tenant", PerTenant, idx2)
	assert.NotEqual(t, r2.Of("acme"), "acme", "a labelled tenant never shares a namespace's name")
}

func TestWithoutALabelEachNamespaceIsATenant(t *testing.T) {
	var none *Resolver
	assert.Equal(t, "t", none.Unit("t/store"))
	assert.Equal(t, "t", New("", PerTenant, nil).Unit("t/store"))
}

func TestEachObjectStoreCanBeItsOwnUnit(t *testing.T) {
	r := New("platform.example.com/tenant", PerObjectStore, namespaces(t, map[string]map[string]string{"t": {"platform.example.com/tenant": "acme"}}))
	assert.Equal(t, "t/one", r.Unit("t/one"))
	assert.NotEqual(t, r.Unit("t/one"), r.Unit("t/two"))
	assert.Equal(t, "tenant:acme", r.Of("t"), "what is kept per namespace (Secrets) still counts per tenant")
}

func TestParseUnits(t *testing.T) {
	u, err := ParseUnits("ObjectStore")
	require.NoError(t, err)
	assert.Equal(t, PerObjectStore, u)
	_, err = ParseUnits("namespace")
	assert.ErrorContains(t, err, "tenant or objectstore")
}
