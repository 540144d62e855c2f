package status

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// ConditionCollector exports every condition of every ObjectStore as
// objectstore_operator_objectstore_condition{namespace,name,type,status,reason} 1,
// read from the informer's cache when scraped (as kube-state-metrics
// does): one series per ObjectStore and condition type, so alerts and
// dashboards see a fleet's state without listing it. Label values are
// bounded: names by the ObjectStores that exist, types and reasons by the
// operator's own constants.
//
// It also exports objectstore_operator_objectstore_release{namespace,name,release} 1
// from status.release, for the fleet's release distribution: one series
// per ObjectStore that reports a release (the CRD bounds its length).
type ConditionCollector struct {
	stores  cache.Indexer
	desc    *prometheus.Desc
	release *prometheus.Desc
}

// NewConditionCollector reads the ObjectStores in stores (an informer's
// indexer of *unstructured.Unstructured).
func NewConditionCollector(stores cache.Indexer) *ConditionCollector {
	return &ConditionCollector{stores: stores, desc: prometheus.NewDesc("objectstore_operator_objectstore_condition",
		"Conditions of the ObjectStores (1 per condition, labelled with its status and reason).",
		[]string{"namespace", "name", "type", "status", "reason"}, nil),
		release: prometheus.NewDesc("objectstore_operator_objectstore_release",
			"The MinIO release each ObjectStore's nodes run (status.release; the oldest while they differ), always 1.",
			[]string{"namespace", "name", "release"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *ConditionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.release }

// Collect implements prometheus.Collector.
func (c *ConditionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, obj := range c.stores.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if release, ok, _ := unstructured.NestedString(u.Object, "status", "release"); ok && release != "" {
			ch <- prometheus.MustNewConstMetric(c.release, prometheus.GaugeValue, 1, u.GetNamespace(), u.GetName(), release)
		}
		field, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
		list, _ := field.([]any)
		seen := map[string]bool{}
		for _, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			var cond metav1.Condition
			if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) != nil || cond.Type == "" || seen[cond.Type] {
				continue
			}
			seen[cond.Type] = true
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1,
				u.GetNamespace(), u.GetName(), cond.Type, string(cond.Status), cond.Reason)
		}
	}
}
