{{/* The Service must be called object-store-operator: pods reach
object-store-operator.<ns>.svc and the certificate names it. */}}
{{- define "osop.name" -}}object-store-operator{{- end -}}

{{- define "osop.labels" -}}
app.kubernetes.io/name: object-store-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: object-store-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pod's labels: podLabels, then the recommended app.kubernetes.io/*
labels, then the selector's, which win: the Deployment's selector is
immutable and must keep matching its pods. */}}
{{- define "osop.podLabels" -}}
{{- $ours := dict
  "app.kubernetes.io/version" (.Chart.AppVersion | toString)
  "app.kubernetes.io/component" "operator"
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/part-of" "object-store-operator" -}}
{{- $selector := include "osop.selectorLabels" . | fromYaml -}}
{{- toYaml (mergeOverwrite (deepCopy (.Values.podLabels | default dict)) $ours $selector) -}}
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
{{- if eq (include "osop.mode" .) "autocert" -}}true{{- end -}}
{{- end -}}

{{/* Whether the operator approves its own CSR (OPERATOR_AUTOCERT_APPROVE, default on). */}}
{{- define "osop.selfApprove" -}}
{{- $approve := lower (trim (include "osop.env" (list . "OPERATOR_AUTOCERT_APPROVE"))) -}}
{{- if and (include "osop.autocert" .) (not (has $approve (list "off" "false" "no" "0" "disable" "disabled"))) -}}true{{- end -}}
{{- end -}}

{{/* The signers the operator may file its CSR with, as a JSON list, for
the approve grant. Which one it uses is the operator's decision alone
(autocert.DetectSigner: the EKS signer when its nodes say EKS, else
kubernetes.io/kubelet-serving), taken at run time: the chart grants both.
OPERATOR_CSR_SIGNER_NAME set in extraEnv is the only signer the operator
uses, so it alone is granted; set through valueFrom, the chart cannot read
it to name it, so that is refused. */}}
{{- define "osop.signers" -}}
{{- range .Values.global.operator.extraEnv -}}
{{- if and (eq .name "OPERATOR_CSR_SIGNER_NAME") (not (hasKey . "value")) -}}
{{- fail "global.operator.extraEnv: set OPERATOR_CSR_SIGNER_NAME with value, not valueFrom: the chart grants approve on the signer it names" -}}
{{- end -}}
{{- end -}}
{{- with include "osop.env" (list . "OPERATOR_CSR_SIGNER_NAME") -}}
{{- list . | toJson -}}
{{- else -}}
{{- list "kubernetes.io/kubelet-serving" "beta.eks.amazonaws.com/app-serving" | toJson -}}
{{- end -}}
{{- end -}}

{{/* Whether OPERATOR_SHUTDOWN_GRACE comes through valueFrom: the chart
cannot read it to size the termination grace. */}}
{{- define "osop.shutdownGraceFromRef" -}}
{{- range .Values.global.operator.extraEnv -}}
{{- if and (eq .name "OPERATOR_SHUTDOWN_GRACE") (not (hasKey . "value")) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Secret autocert stores its certificate in. */}}
{{- define "osop.autocertSecret" -}}
{{- default "object-store-operator-tls" (include "osop.env" (list . "OPERATOR_AUTOCERT_SECRET_NAME")) -}}
{{- end -}}

{{/* OPERATOR_SHUTDOWN_GRACE in whole seconds, rounded up (default 30s):
the Go duration syntax the operator parses (2m30s, 1500ms, 1h, +30s, and
0, the one duration without a unit). */}}
{{- define "osop.shutdownGraceSeconds" -}}
{{- $v := default "30s" (include "osop.env" (list . "OPERATOR_SHUTDOWN_GRACE")) -}}
{{- if not (regexMatch "^\\+?(0|([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h))*)$" $v) -}}
{{- fail (printf "global.operator.extraEnv: OPERATOR_SHUTDOWN_GRACE: %q is not a duration (such as 30s or 2m)" $v) -}}
{{- end -}}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)" $v -1 -}}
{{- $number := regexFind "^[0-9.]+" . -}}
{{- $unit := trimPrefix $number . -}}
{{- $total = addf $total (mulf (float64 $number) (get $units $unit)) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/* The URL pods fetch updates from, as the operator works it out:
OPERATOR_UPDATE_URL, else the Service's name in the cluster domain, https
unless the upgrade server serves plain HTTP. */}}
{{- define "osop.updateURL" -}}
{{- with include "osop.env" (list . "OPERATOR_UPDATE_URL") -}}
{{- trimSuffix "/" . -}}
{{- else -}}
{{- $scheme := ternary "http" "https" (eq (include "osop.mode" .) "plain") -}}
{{- $domain := default "cluster.local" (include "osop.env" (list . "CLUSTER_DOMAIN")) -}}
{{- printf "%s://%s.%s.svc.%s:%v/webhook/v1/update" $scheme (include "osop.name" .) .Release.Namespace $domain .Values.service.upgradePort -}}
{{- end -}}
{{- end -}}

{{/* The TLS mode the settings select (cmd/operator/config.go, mode), for
the RBAC autocert needs and the notes: files, custom, plain or autocert. */}}
{{- define "osop.mode" -}}
{{- $off := has (lower (trim (include "osop.env" (list . "OPERATOR_AUTO_CERT_DISABLED")))) (list "on" "true" "yes" "1" "enable" "enabled") -}}
{{- if include "osop.env" (list . "OPERATOR_TLS_CERT_FILE") -}}files
{{- else if and $off (include "osop.env" (list . "OPERATOR_CUSTOM_TLS_SECRET_NAME")) -}}custom
{{- else if $off -}}plain
{{- else -}}autocert
{{- end -}}
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
# image after an in-place update, or to roll when it cannot be done; hold
# the rolling update's partition (and say so in an annotation) while the
# operator replaces the pods itself, one at a time (the admission policy
# holds patches to exactly these fields).
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [list, watch, patch]
# Where tenants' pods run, for the platform of their binary, and which
# run the current template: StatefulSet pods only (label
# statefulset.kubernetes.io/pod-name), cached trimmed to names, labels,
# owners, spec.nodeName and Ready. get: the Pod an admin endpoint's
# EndpointSlice names, to check it has that address. delete: the rollout
# replaces a pod under OnDelete, one at a time, when MinIO agrees (the
# admission policy allows deletes of StatefulSet pods only).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete]
# Where an admin endpoint <service>.<namespace>.svc leads, read when the
# operator connects instead of asking DNS: the Service (an ExternalName is
# refused) and its EndpointSlices (docs/updates.md).
- apiGroups: [""]
  resources: [services]
  verbs: [get]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list]
# client-go's recorder writes core/v1 Events: it creates one and patches
# its count when it repeats.
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/* An image reference from a value with registry, repository, tag and
digest: <registry>/<repository>@<digest> when a digest is set (it names
the bytes; the tag is then only a label and left out), else
<registry>/<repository>:<tag>. Called with (list <image value> <default
tag>). */}}
{{- define "osop.imageRef" -}}
{{- $image := index . 0 -}}
{{- $repository := $image.repository -}}
{{- with $image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default (index . 1) ($image.tag | toString)) -}}
{{- end -}}
{{- end -}}

{{/* The operator's image. Its default, object-store-operator:<appVersion>,
is what `make image` tags. */}}
{{- define "osop.image" -}}
{{- include "osop.imageRef" (list .Values.image .Chart.AppVersion) -}}
{{- end -}}

{{/* The operator container's env: what the chart sets, then
global.operator.extraEnv merged by name. An extraEnv entry whose name the
chart already sets replaces the chart's entry in place, and one name given
twice in extraEnv keeps its last entry, so every name appears once:
server-side apply (Argo CD, Helm 4) refuses a container whose env lists a
name twice (env is a list keyed by name). */}}
{{- define "osop.containerEnv" -}}
{{- $env := list -}}
{{- $env = append $env (dict "name" "OPERATOR_NAMESPACE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.namespace"))) -}}
{{- $env = append $env (dict "name" "OPERATOR_UPGRADE_ADDRESS" "value" (printf ":%v" .Values.service.upgradePort)) -}}
{{- $env = append $env (dict "name" "OPERATOR_METRICS_ADDRESS" "value" (printf ":%v" .Values.service.metricsPort)) -}}
{{- $env = append $env (dict "name" "OPERATOR_UPDATE_DIR" "value" (.Values.updates.mountPath | toString)) -}}
{{- /* The ClusterTrustBundle is owned by the chart's ClusterRole, so helm
uninstall removes it (docs/trust.md). */ -}}
{{- if .Values.rbac.create -}}
{{- $env = append $env (dict "name" "OPERATOR_CLUSTER_TRUST_BUNDLE_OWNER" "value" (printf "%s-%s" (include "osop.name" .) .Release.Namespace)) -}}
{{- end -}}
{{- with (include "osop.watchNamespaces" .) -}}
{{- $env = append $env (dict "name" "OPERATOR_WATCH_NAMESPACES" "value" .) -}}
{{- end -}}
{{- /* The store's limit: updates.maxBytes, else 3/4 of the emptyDir's
sizeLimit, so binaries being pulled still fit before the kubelet evicts the
pod. */ -}}
{{- if .Values.updates.maxBytes -}}
{{- $env = append $env (dict "name" "OPERATOR_STORE_MAX_BYTES" "value" (.Values.updates.maxBytes | toString)) -}}
{{- else -}}
{{- $limit := .Values.updates.sizeLimit | toString -}}
{{- $mi := 0 -}}
{{- if hasSuffix "Gi" $limit -}}
{{- $mi = mul (trimSuffix "Gi" $limit | int) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}
{{- $mi = trimSuffix "Mi" $limit | int -}}
{{- end -}}
{{- if le (int $mi) 0 -}}
{{- fail "updates.sizeLimit must be a whole number of Mi or Gi (e.g. 4Gi), or set updates.maxBytes" -}}
{{- end -}}
{{- $env = append $env (dict "name" "OPERATOR_STORE_MAX_BYTES" "value" (printf "%dMi" (div (mul $mi 3) 4))) -}}
{{- end -}}
{{- /* global.operator.extraEnv: the last entry of each name wins. */ -}}
{{- $extra := dict -}}
{{- range .Values.global.operator.extraEnv -}}
{{- $_ := set $extra .name . -}}
{{- end -}}
{{- $out := list -}}
{{- $seen := dict -}}
{{- range $env -}}
{{- $out = append $out (get $extra .name | default .) -}}
{{- $_ := set $seen .name true -}}
{{- end -}}
{{- range .Values.global.operator.extraEnv -}}
{{- if not (hasKey $seen .name) -}}
{{- $out = append $out (get $extra .name) -}}
{{- $_ := set $seen .name true -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The pod's affinity: the affinity value, plus an anti-affinity between
replicas (podAntiAffinity) when there is more than one and the value sets
none of its own. */}}
{{- define "osop.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $anti := .Values.podAntiAffinity -}}
{{- if and (gt (int .Values.replicas) 1) $anti.type (not (hasKey $affinity "podAntiAffinity")) -}}
{{- $term := dict "topologyKey" $anti.topologyKey "labelSelector" (dict "matchLabels" (include "osop.selectorLabels" . | fromYaml)) -}}
{{- if eq $anti.type "hard" -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) -}}
{{- else -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" (int $anti.weight) "podAffinityTerm" $term))) -}}
{{- end -}}
{{- end -}}
{{- if $affinity -}}{{- toYaml $affinity -}}{{- end -}}
{{- end -}}
