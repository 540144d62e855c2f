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

// The fleet's release distribution: one series per ObjectStore that reports
// a release (status.release), none for one that does not yet.
func TestTheReleaseOfEveryObjectStoreIsOneSeries(t *testing.T) {
	stores := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, u := range []*unstructured.Unstructured{
		{Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "t1"}, "status": map[string]any{"release": "RELEASE.2026-01-10T10-00-00Z"}}},
		{Object: map[string]any{"metadata": map[string]any{"name": "b", "namespace": "t2"}, "status": map[string]any{"release": "RELEASE.2026-02-20T10-00-00Z"}}},
		{Object: map[string]any{"metadata": map[string]any{"name": "c", "namespace": "t2"}}},
		{Object: map[string]any{"metadata": map[string]any{"name": "d", "namespace": "t2"}, "status": map[string]any{"release": 42}}},
	} {
		require.NoError(t, stores.Add(u))
	}
	want := `# HELP objectstore_operator_objectstore_release The MinIO release each ObjectStore's nodes run (status.release; the oldest while they differ), always 1.
# TYPE objectstore_operator_objectstore_release gauge
objectstore_operator_objectstore_release{name="a",namespace="t1",release="RELEASE.2026-01-10T10-00-00Z"} 1
objectstore_operator_objectstore_release{name="b",namespace="t2",release="RELEASE.2026-02-20T10-00-00Z"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewConditionCollector(stores), strings.NewReader(want), "objectstore_operator_objectstore_release"))
}
