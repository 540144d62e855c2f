{{/* The Service must be called object-store-operator: pods reach
object-store-operator.<ns>.svc and the certificate names it. */}}
{{- define "osop.name" -}}object-store-operator{{- end -}}

{{- define "osop.labels" -}}
app.kubernetes.io/name: object-store-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "osop.selectorLabels" -}}
app.kubernetes.io/name: object-store-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "osop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "osop.name" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The value of an env var set in global.operator.extraEnv, or "". */}}
{{- define "osop.env" -}}
{{- $name := index . 1 -}}
{{- $value := "" -}}
{{- range (index . 0).Values.global.operator.extraEnv -}}
{{- if and (eq .name $name) (hasKey . "value") -}}{{- $value = .value -}}{{- end -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{/* Whether autocert (the CSR flow) is on, judged like the operator does. */}}
{{- define "osop.autocert" -}}
{{- $off := lower (include "osop.env" (list . "OPERATOR_AUTO_CERT_DISABLED")) -}}
{{- $files := include "osop.env" (list . "OPERATOR_TLS_CERT_FILE") -}}
{{- if and (not (has $off (list "on" "true" "yes" "1" "enable" "enabled"))) (eq $files "") -}}true{{- end -}}
{{- end -}}

{{/* Whether the operator approves its own CSR (OPERATOR_AUTOCERT_APPROVE, default on). */}}
{{- define "osop.selfApprove" -}}
{{- $approve := lower (include "osop.env" (list . "OPERATOR_AUTOCERT_APPROVE")) -}}
{{- if and (include "osop.autocert" .) (not (has $approve (list "off" "false" "no" "0" "disable" "disabled"))) -}}true{{- end -}}
{{- end -}}

{{- define "osop.signer" -}}
{{- default "kubernetes.io/kubelet-serving" (include "osop.env" (list . "OPERATOR_CSR_SIGNER_NAME")) -}}
{{- end -}}

{{/* watchNamespaces, comma-joined ("" for every namespace). The
operator's scope and the chart's RBAC both follow this value, so setting
OPERATOR_WATCH_NAMESPACES in extraEnv instead is refused. */}}
{{- define "osop.watchNamespaces" -}}
{{- if include "osop.env" (list . "OPERATOR_WATCH_NAMESPACES") -}}
{{- fail "set watchNamespaces, not OPERATOR_WATCH_NAMESPACES in global.operator.extraEnv: the chart's RBAC follows watchNamespaces" -}}
{{- end -}}
{{- $names := list -}}
{{- range .Values.watchNamespaces -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .) -}}
{{- fail (printf "watchNamespaces: %q is not a namespace name" .) -}}
{{- end -}}
{{- $names = append $names . -}}
{{- end -}}
{{- $names | uniq | sortAlpha | join "," -}}
{{- end -}}

{{/* What the operator does to tenants: cluster-wide in the ClusterRole
when it watches every namespace, else in a Role per watched namespace. */}}
{{- define "osop.tenantRules" -}}
# Read ObjectStores (through an informer only: no get); report status.
- apiGroups: [aistor.min.io]
  resources: [objectstores]
  verbs: [list, watch]
# Every status write is a server-side apply (a patch), one field manager
# per controller.
- apiGroups: [aistor.min.io]
  resources: [objectstores/status]
  verbs: [patch]
# <name>-generated is owned by its ObjectStore with blockOwnerDeletion;
# OwnerReferencesPermissionEnforcement (on in OpenShift) requires this.
- apiGroups: [aistor.min.io]
  resources: [objectstores/finalizers]
  verbs: [update]
# Read referenced Secrets (and, for in-place updates, the tenant's
# configuration Secret); create and rewrite <name>-generated (the
# admission policy holds writes to Secrets labelled and owned by an
# ObjectStore). No delete: the garbage collector removes generated
# Secrets with their ObjectStore.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update]
# Roll pods by annotating the pod template; set the minio container's
# image after an in-place update, or to roll when it cannot be done (the
# admission policy holds patches to exactly these two fields).
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [list, watch, patch]
# Where tenants' pods run, for the platform of their binary: StatefulSet
# pods only (label statefulset.kubernetes.io/pod-name), cached trimmed to
# names, labels, owners and spec.nodeName.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
# client-go's recorder writes core/v1 Events: it creates one and patches
# its count when it repeats.
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
