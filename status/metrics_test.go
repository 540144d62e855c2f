package status

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func TestEveryConditionOfEveryObjectStoreIsOneSeries(t *testing.T) {
	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, u := range []*unstructured.Unstructured{
		{Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "t1"}, "status": map[string]any{"conditions": []any{
			map[string]any{"type": "VersionCurrent", "status": "False", "reason": "UpdateQueued", "message": "m", "lastTransitionTime": "2026-11-24T10:00:00Z"},
			map[string]any{"type": "BinaryAvailable", "status": "True", "reason": "Available", "message": "m", "lastTransitionTime": "2026-11-24T10:00:00Z"},
			"not a condition",
		}}}},
		{Object: map[string]any{"metadata": map[string]any{"name": "b", "namespace": "t2"}}},
	} {
		require.NoError(t, stores.Add(u))
	}
	want := `# HELP objectstore_operator_objectstore_condition Conditions of the ObjectStores (1 per condition, labelled with its status and reason).
# TYPE objectstore_operator_objectstore_condition gauge
objectstore_operator_objectstore_condition{name="a",namespace="t1",reason="Available",status="True",type="BinaryAvailable"} 1
objectstore_operator_objectstore_condition{name="a",namespace="t1",reason="UpdateQueued",status="False",type="VersionCurrent"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewConditionCollector(stores), strings.NewReader(want)))
}
