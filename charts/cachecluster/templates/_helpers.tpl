{{/*
Labels on every object. app.kubernetes.io/instance is left out on purpose:
Argo CD may track its own resources with that label, and children of a
CacheCluster must never look like they belong to an Argo CD application.
*/}}
{{- define "cachecluster.labels" -}}
app.kubernetes.io/name: cachecluster
app.kubernetes.io/component: cache
app.kubernetes.io/managed-by: cacheops
app.kubernetes.io/part-of: cacheops
cache.cacheops.io/cluster: {{ .Values.name | quote }}
{{- end }}

{{/* Labels that select the Redis pods of this cluster. */}}
{{- define "cachecluster.selectorLabels" -}}
app.kubernetes.io/name: cachecluster
cache.cacheops.io/cluster: {{ .Values.name | quote }}
{{- end }}

{{/* Labels of the backup-store pod (spec.backup.pvc). */}}
{{- define "cachecluster.backupStoreLabels" -}}
app.kubernetes.io/name: cachecluster-backup-store
cache.cacheops.io/backup-store: {{ .Values.name | quote }}
{{- end }}

{{/* The NetworkPolicy peer of the operator's pods. */}}
{{- define "cachecluster.operatorPeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.networkPolicy.operator.namespace | quote }}
  podSelector:
    matchLabels:
      {{- with .Values.networkPolicy.operator.podLabels }}
      {{- toYaml . | nindent 6 }}
      {{- else }}
      app.kubernetes.io/component: manager
      app.kubernetes.io/name: cacheops
      {{- end }}
{{- end }}
