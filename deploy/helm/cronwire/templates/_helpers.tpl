{{- define "cronwire.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cronwire.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cronwire.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cronwire.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cronwire.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "cronwire.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "cronwire.secretName" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else -}}
{{- printf "%s-db" (include "cronwire.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "cronwire.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
The Deployments to render: one with every role, or one per role when split.enabled.
Each item: name (suffix of the object names, "" for the single one), roles, replicas.
*/}}
{{- define "cronwire.components" -}}
{{- if .Values.split.enabled -}}
{{- range $role := list "api" "planner" "executor" }}
- name: {{ $role }}
  roles: {{ $role }}
  replicas: {{ (index $.Values.split $role).replicaCount }}
{{- end }}
{{- else -}}
- name: ""
  roles: api,planner,executor
  replicas: {{ .Values.replicaCount }}
{{- end -}}
{{- end -}}

{{/* The Deployment that executes runs (the autoscaling target). */}}
{{- define "cronwire.executorName" -}}
{{- if .Values.split.enabled -}}
{{- printf "%s-executor" (include "cronwire.fullname" .) -}}
{{- else -}}
{{- include "cronwire.fullname" . -}}
{{- end -}}
{{- end -}}
