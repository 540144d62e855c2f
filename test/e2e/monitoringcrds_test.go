package e2e

import (
	"sync"
	"testing"
)

// monitoringCRDs are the Prometheus Operator's ServiceMonitor, PodMonitor
// and PrometheusRule (monitoring.coreos.com/v1), cut down to what the
// chart's templates set: the structure they use is typed and required as
// upstream's CRDs do (v0.8x), the rest is kept as written. Enough for the
// apiserver to admit or refuse what the chart renders; not a copy of
// upstream's schema.
const monitoringCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor, shortNames: [smon]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          required: [spec]
          properties:
            spec:
              type: object
              required: [selector]
              x-kubernetes-preserve-unknown-fields: true
              properties:
                selector:
                  type: object
                  properties:
                    matchLabels: {type: object, additionalProperties: {type: string}}
                    matchExpressions:
                      type: array
                      items:
                        type: object
                        required: [key, operator]
                        properties:
                          key: {type: string}
                          operator: {type: string}
                          values: {type: array, items: {type: string}}
                endpoints:
                  type: array
                  items:
                    type: object
                    x-kubernetes-preserve-unknown-fields: true
                    properties:
                      port: {type: string}
                      path: {type: string}
                      interval: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podmonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PodMonitor, listKind: PodMonitorList, plural: podmonitors, singular: podmonitor, shortNames: [pmon]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          required: [spec]
          properties:
            spec:
              type: object
              required: [selector]
              x-kubernetes-preserve-unknown-fields: true
              properties:
                selector:
                  type: object
                  properties:
                    matchLabels: {type: object, additionalProperties: {type: string}}
                    matchExpressions:
                      type: array
                      items:
                        type: object
                        required: [key, operator]
                        properties:
                          key: {type: string}
                          operator: {type: string}
                          values: {type: array, items: {type: string}}
                podMetricsEndpoints:
                  type: array
                  items:
                    type: object
                    x-kubernetes-preserve-unknown-fields: true
                    properties:
                      port: {type: string}
                      path: {type: string}
                      interval: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, listKind: PrometheusRuleList, plural: prometheusrules, singular: prometheusrule, shortNames: [promrule]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          required: [spec]
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
              properties:
                groups:
                  type: array
                  items:
                    type: object
                    required: [name]
                    x-kubernetes-preserve-unknown-fields: true
                    properties:
                      name: {type: string, minLength: 1}
                      interval: {type: string}
                      rules:
                        type: array
                        items:
                          type: object
                          required: [expr]
                          x-kubernetes-preserve-unknown-fields: true
                          properties:
                            record: {type: string, minLength: 1}
                            alert: {type: string, minLength: 1}
                            expr: {x-kubernetes-int-or-string: true}
                            for: {type: string}
                            labels: {type: object, additionalProperties: {type: string}}
                            annotations: {type: object, additionalProperties: {type: string}}
`

var monitoringCRDsOnce sync.Once

// ensureMonitoringCRDs applies the Prometheus Operator CRDs above into the
// test apiserver (once per package), for the chart's ServiceMonitor,
// PodMonitor and PrometheusRule to be admitted.
func ensureMonitoringCRDs(t testing.TB) {
	t.Helper()
	monitoringCRDsOnce.Do(func() {
		applyYAML(t, monitoringCRDs)
		kubectl(t, "wait", "--for=condition=Established", "--timeout=30s",
			"crd/servicemonitors.monitoring.coreos.com", "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	})
}
