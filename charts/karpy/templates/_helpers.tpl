{{/*
Helpers of karpy's chart (Karpenter's, renamed). karpy's tests render the chart with the real helm
(karpy.install.chart) and install it on a real cluster (tests/realcluster).
*/}}

{{/* Expand the name of the chart. */}}
{{- define "karpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* A fully qualified app name: the release name, with the chart's name unless it already holds it. */}}
{{- define "karpy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "karpy.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "karpy.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Chart name and version as used by the chart label. */}}
{{- define "karpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "karpy.labels" -}}
helm.sh/chart: {{ include "karpy.chart" . }}
{{ include "karpy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels. */}}
{{- define "karpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The name of the service account to use. */}}
{{- define "karpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The controller image. */}}
{{- define "karpy.controller.image" -}}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository (default .Chart.AppVersion .Values.controller.image.tag) .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository (default .Chart.AppVersion .Values.controller.image.tag) }}
{{- end }}
{{- end }}

{{/* Karpenter's FEATURE_GATES string from settings.featureGates. */}}
{{- define "karpy.featureGates" -}}
{{- printf "NodeRepair=%v,ReservedCapacity=%v,SpotToSpotConsolidation=%v,NodeOverlay=%v,StaticCapacity=%v" .Values.settings.featureGates.nodeRepair .Values.settings.featureGates.reservedCapacity .Values.settings.featureGates.spotToSpotConsolidation .Values.settings.featureGates.nodeOverlay .Values.settings.featureGates.staticCapacity }}
{{- end }}
