{{/* The chart's name, and the release's full name (63 characters at most). */}}
{{- define "cuslice.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cuslice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cuslice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cuslice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cuslice.labels" -}}
{{ include "cuslice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cuslice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The options both plugins share: cusliced (its admin socket for the plugins'
own calls; its registration socket, whose directory alone workloads get, at
libcuslice's default path), the containers' mounts, the groups.
*/}}
{{- define "cuslice.pluginArgs" -}}
- --cusliced={{ .Values.daemon.socketDir }}/admin/cusliced.sock
- --registration-socket={{ .Values.daemon.socketDir }}/tenant/cusliced.sock
- --container-socket=/run/cuslice/cusliced.sock
- --lib={{ .Values.daemon.stateDir }}/lib/libcuslice.so
- --preload={{ if .Values.groups.preload }}on{{ else }}off{{ end }}
- --gpu-injection={{ .Values.groups.gpuInjection }}
- --mode={{ .Values.groups.mode }}
- --on-violation={{ .Values.groups.onViolation }}
- --log-level={{ .Values.daemon.logLevel }}
{{- end -}}
