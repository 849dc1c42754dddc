{{/* The release's full name: the release name, or release-chart when they differ. */}}
{{- define "cacheops.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
Labels on every object of this chart. app.kubernetes.io/managed-by is the
tool that installed the chart, never "cacheops": the operator reads objects
labelled managed-by=cacheops as children of a CacheCluster.
*/}}
{{- define "cacheops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/name: cacheops
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/part-of: cacheops
{{- end }}

{{/* Labels that select the manager's pods. */}}
{{- define "cacheops.selectorLabels" -}}
app.kubernetes.io/name: cacheops
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: manager
{{- end }}

{{/* A map of labels as k=v,k=v, sorted by key. */}}
{{- define "cacheops.labelList" -}}
{{- $out := list -}}
{{- range $k, $v := . -}}
{{- $out = append $out (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{- define "cacheops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cacheops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{- define "cacheops.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end }}

{{/*
The namespaces the operator watches, as a JSON array: watchNamespaces
without repeats, or the release namespace when it is empty. Refuses
watchNamespaces together with watchAllNamespaces, which would be ambiguous.
*/}}
{{- define "cacheops.watchNamespaces" -}}
{{- if and .Values.watchAllNamespaces .Values.watchNamespaces -}}
{{- fail "watchNamespaces and watchAllNamespaces exclude each other: list the namespaces, or watch all of them" -}}
{{- end -}}
{{- if .Values.watchNamespaces -}}
{{- uniq .Values.watchNamespaces | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end }}

{{/* The leader election Lease's name, as cmd/manager sets it. */}}
{{- define "cacheops.leaseName" -}}
cacheops.cache.cacheops.io
{{- end }}

{{/*
The permissions the manager needs in every namespace it watches, derived from
what the controllers do (renderer/controller, dayTwo):
- CacheClusters: read and watch; patch to add and remove the finalizer and
  the operator's annotations; the status subresource (patch) for phase and
  conditions; finalizers/update so children
  may carry an owner reference with blockOwnerDeletion.
- The kinds charts/cachecluster renders: server-side apply (create, patch),
  read through the label-filtered cache (get, list, watch) and prune (delete).
  Secrets also hold the generated password and are read for
  spec.auth.secretRef.
- Pods: watched for their cluster label; day-two patches the role label,
  deletes a pod stuck not-Ready or due for a restart in an upgrade so its
  StatefulSet recreates it, and creates the temporary pod (with its own
  ConfigMap) of an upgrade's pre-check.
- PersistentVolumeClaims: listed and deleted when a CacheCluster is deleted
  without storage.retainOnDelete.
- Events (events.k8s.io) about CacheClusters.
No update verb: the operator never replaces an object, and never writes a
CacheCluster's spec.
*/}}
{{- define "cacheops.rules" -}}
- apiGroups: ["cache.cacheops.io"]
  resources: ["cacheclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["cache.cacheops.io"]
  resources: ["cacheclusters/status"]
  verbs: ["patch"]
- apiGroups: ["cache.cacheops.io"]
  resources: ["cacheclusters/finalizers"]
  verbs: ["update"]
# Backup history: scheduled backups are created, adopted (patch), and
# removed by retention; an attempt's status is written with an update and
# an optimistic lock.
- apiGroups: ["cache.cacheops.io"]
  resources: ["cachebackups"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["cache.cacheops.io"]
  resources: ["cachebackups/status"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps", "secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# spec.tls.issuerRef: the cert-manager Certificate the chart renders, and
# its requests, whose conditions say why an issuer does not sign.
- apiGroups: ["cert-manager.io"]
  resources: ["certificates"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: ["cert-manager.io"]
  resources: ["certificaterequests"]
  verbs: ["list"]
{{- end }}
