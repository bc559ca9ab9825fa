{{/* Labels every object carries. */}}
{{- define "deckhand.labels" -}}
app.kubernetes.io/name: deckhand
app.kubernetes.io/part-of: deckhand
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The manager pods' selector; the same as config/default's. */}}
{{- define "deckhand.selector" -}}
app.kubernetes.io/name: deckhand
control-plane: controller-manager
{{- end -}}
