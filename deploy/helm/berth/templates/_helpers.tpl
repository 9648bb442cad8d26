{{/*
Names and labels. Component templates take a dict: (dict "root" $ "component" "scheduler").
*/}}

{{/* The chart name (nameOverride). */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: <release>-<chart> truncated to 63 characters (some Kubernetes name fields are
limited to that by the DNS naming spec); the release name alone when it contains the chart name.
*/}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version for the helm.sh/chart label. */}}
{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "berth.labels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- end }}

{{/* Selector labels of the release (every component). */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of a component's resources. */}}
{{- define "berth.componentLabels" -}}
{{ include "berth.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selector labels of a component's pods. */}}
{{- define "berth.componentSelectorLabels" -}}
{{ include "berth.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* A component's resource name: <fullname>-<component>. */}}
{{- define "berth.componentName" -}}
{{- printf "%s-%s" (include "berth.fullname" .root | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{/* The ServiceAccount a component's pods run as: (dict "root" $ "component" c). */}}
{{- define "berth.serviceAccountName" -}}
{{- if .root.Values.serviceAccount.create }}
{{- include "berth.componentName" . }}
{{- else }}
{{- default "default" .root.Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The components this release runs. */}}
{{- define "berth.components" -}}
{{- $out := list "queue" "scheduler" "binder" }}
{{- if .Values.kubernetes.enabled }}{{ $out = append $out "adapter" }}{{ end }}
{{- if .Values.dashboard.enabled }}{{ $out = append $out "dashboard" }}{{ end }}
{{- join "," $out }}
{{- end }}

{{/*
Kubernetes mode refuses a profile named default-scheduler (an unnamed lone profile is one)
unless kubernetes.takeOverDefaultScheduler: berth would take kube-scheduler's pods.
*/}}
{{- define "berth.kubeProfileCheck" -}}
{{- if and .Values.kubernetes.enabled (not .Values.kubernetes.takeOverDefaultScheduler) }}
{{- $profiles := .Values.schedulerConfig.profiles | default (list dict) }}
{{- range $profiles }}
{{- $name := .schedulerName | default (ternary "default-scheduler" "" (eq (len $profiles) 1)) }}
{{- if eq $name "default-scheduler" }}
{{- fail "kubernetes.enabled with a profile named \"default-scheduler\": berth would take every pod kube-scheduler schedules; name berth's profiles in schedulerConfig.profiles (e.g. schedulerName: berth), or set kubernetes.takeOverDefaultScheduler=true to replace kube-scheduler" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ConfigMap holding the KubeSchedulerConfiguration. */}}
{{- define "berth.configMapName" -}}
{{- printf "%s-config" (include "berth.fullname" . | trunc 56 | trimSuffix "-") }}
{{- end }}

{{- define "berth.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- with .Values.image.digest }}
{{- if not (hasPrefix "sha256:" .) }}
{{- fail (printf "image.digest %q: expected sha256:<64 hex digits>" .) }}
{{- end }}
{{- $image = printf "%s@%s" $image . }}
{{- end }}
{{- $image }}
{{- end }}

{{/*
Kafka. Topic names are fixed in berth (shared.messaging.kafka.Topics); kafka.topicSuffix is appended.
(dict "root" $ "topic" "schedule") -> berth.schedule[.<suffix>]
*/}}
{{- define "berth.topicName" -}}
{{- $names := dict "schedule" "berth.schedule" "proposals" "berth.proposals" "outcomes" "berth.outcomes" "dlq" "berth.dlq" }}
{{- $name := get $names .topic }}
{{- if not $name }}
{{- fail (printf "unknown topic %q: one of %s" .topic (keys $names | sortAlpha | join ", ")) }}
{{- end }}
{{- if .root.Values.kafka.topicSuffix }}
{{- printf "%s.%s" $name .root.Values.kafka.topicSuffix }}
{{- else }}
{{- $name }}
{{- end }}
{{- end }}

{{/* A service's consumer group: berth-<service>[.<suffix>] (shared.runtime.env.StackSettings). */}}
{{- define "berth.groupId" -}}
{{- if .root.Values.kafka.topicSuffix }}
{{- printf "berth-%s.%s" .component .root.Values.kafka.topicSuffix }}
{{- else }}
{{- printf "berth-%s" .component }}
{{- end }}
{{- end }}

{{/*
Replica bounds. A consumer group never uses more members than its topic has partitions, so
with capToPartitions a component's replicas are capped at the partition count of its lag
topic (the scheduler: berth.schedule).
*/}}
{{- define "berth.replicaCap" -}}
{{- $values := index .root.Values .component }}
{{- if $values.autoscaling.capToPartitions }}
{{- $partitions := get .root.Values.kafka.partitions $values.autoscaling.lagTopic }}
{{- if not $partitions }}
{{- fail (printf "%s.autoscaling.lagTopic %q: no such key in kafka.partitions" .component $values.autoscaling.lagTopic) }}
{{- end }}
{{- int $partitions }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/* (dict "root" $ "component" c "value" n) -> n, capped as above. */}}
{{- define "berth.capReplicas" -}}
{{- $cap := include "berth.replicaCap" . | int }}
{{- $value := int .value }}
{{- if and (gt $cap 0) (gt $value $cap) }}
{{- $cap }}
{{- else }}
{{- $value }}
{{- end }}
{{- end }}

{{/* Environment shared by every service (the names shared.runtime.env.StackSettings.env uses). */}}
{{- define "berth.env" -}}
{{- $root := .root }}
{{- $values := index $root.Values .component -}}
{{- include "berth.securityChecks" $root }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: BERTH_REDIS_URL
{{- if and $root.Values.redis.existingSecret $root.Values.redis.existingSecretKey }}
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.redis.existingSecret }}
      key: {{ $root.Values.redis.existingSecretKey }}
{{- else }}
  value: {{ required "redis.url (or redis.existingSecret) is required" $root.Values.redis.url | quote }}
{{- end }}
- name: BERTH_KAFKA_BOOTSTRAP
  value: {{ required "kafka.bootstrap is required" $root.Values.kafka.bootstrap | quote }}
{{- include "berth.securityEnv" $root }}
{{- include "berth.messageKeysEnv" . }}
{{- if $root.Values.redis.users.enabled }}
- name: BERTH_REDIS_USERNAME
  value: {{ printf "%s%s" $root.Values.redis.users.usernamePrefix .component | quote }}
- name: BERTH_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.redis.existingSecret }}
      key: {{ printf "%s-password" .component }}
{{- end }}
{{- $sasl := $root.Values.kafka.sasl }}
{{- /* Only the components that talk to Kafka (the agent does not) get a SASL user. */}}
{{- if and $sasl.users.enabled (hasPrefix "SASL_" $root.Values.kafka.securityProtocol) (include "berth.messageKeyComponents" .) }}
- name: BERTH_KAFKA_SASL_USERNAME
  value: {{ printf "%s%s" $sasl.users.usernamePrefix .component | quote }}
- name: BERTH_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $sasl.existingSecret }}
      key: {{ printf "%s-password" .component }}
{{- end }}
- name: BERTH_CLUSTER
  value: {{ $root.Values.store.cluster | quote }}
- name: BERTH_KEY_PREFIX
  value: {{ $root.Values.store.keyPrefix | quote }}
- name: BERTH_QUEUE_PREFIX
  value: {{ $root.Values.store.queueKeyPrefix | quote }}
{{- if $root.Values.kafka.topicSuffix }}
- name: BERTH_TOPIC_SUFFIX
  value: {{ $root.Values.kafka.topicSuffix | quote }}
{{- end }}
{{- if $root.Values.kafka.sessionTimeoutMs }}
- name: BERTH_SESSION_MS
  value: {{ $root.Values.kafka.sessionTimeoutMs | int | quote }}
{{- end }}
- name: BERTH_CONFIG
  value: /etc/berth/config.yaml
{{- if eq .component "queue" }}
- name: BERTH_KUEUE_MODE
  value: {{ $root.Values.kueue.mode | default "berth" | quote }}
{{- end }}
{{- if and (eq .component "queue") $values.singleTenant }}
- name: BERTH_SINGLE_TENANT
  value: {{ $values.singleTenant | quote }}
{{- end }}
{{- if and (eq .component "scheduler") (not (kindIs "invalid" $values.seed)) }}
- name: BERTH_SEED
  value: {{ $values.seed | int | quote }}
{{- end }}
{{- if and $root.Values.kubernetes.enabled (has .component (list "adapter" "binder" "dashboard")) }}
- name: BERTH_KUBE
  value: in-cluster
{{- end }}
{{- if and $root.Values.kubernetes.enabled (eq .component "adapter") }}
- name: BERTH_KUBE_LEASE_NAMESPACE
  value: {{ $root.Values.kubernetes.leaseNamespace | default $root.Release.Namespace | quote }}
- name: BERTH_KUBE_LEASE_NAME
  value: {{ $root.Values.kubernetes.leaseName | default (include "berth.fullname" $root) | quote }}
{{- if $root.Values.kubernetes.takeOverDefaultScheduler }}
- name: BERTH_KUBE_TAKE_DEFAULT_SCHEDULER
  value: "1"
{{- end }}
{{- end }}
{{- if eq .component "agent" }}
- name: BERTH_NODE_MONITOR_GRACE_PERIOD
  value: {{ $values.nodeMonitorGracePeriod | toString | quote }}
- name: BERTH_NODE_HEARTBEAT_SECONDS
  value: {{ $values.heartbeatSeconds | toString | quote }}
{{- end }}
{{- if eq .component "dashboard" }}
- name: BERTH_DASHBOARD_PORT
  value: {{ $values.port | int | quote }}
- name: BERTH_DASHBOARD_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- if $values.tokensSecret }}
- name: BERTH_TOKENS_FILE
  value: /etc/berth-tokens/tokens.yaml
{{- end }}
{{- end }}
- name: BERTH_METRICS_PORT
  value: {{ $root.Values.metrics.port | int | quote }}
- name: BERTH_METRICS_HOST
{{- if $root.Values.metrics.host }}
  value: {{ $root.Values.metrics.host | quote }}
{{- else }}
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
{{- if $root.Values.tracing.otlpEndpoint }}
- name: BERTH_OTLP_ENDPOINT
  value: {{ $root.Values.tracing.otlpEndpoint | quote }}
- name: BERTH_TRACE_SAMPLE_RATIO
  value: {{ $root.Values.tracing.sampleRatio | toString | quote }}
- name: BERTH_OTLP_TIMEOUT_SECONDS
  value: {{ $root.Values.tracing.exportTimeoutSeconds | toString | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "berth-%s" .component | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.deployment.name=%s,service.version=%s" (include "berth.componentName" .) $root.Chart.AppVersion | quote }}
{{- end }}
- name: HOME
  value: /tmp
- name: PYTHONUNBUFFERED
  value: "1"
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with $values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The container's command line. */}}
{{- define "berth.command" -}}
{{- $values := index .root.Values .component }}
{{- $args := concat $values.command $values.extraArgs }}
{{- if eq .component "scheduler" }}
{{- $args = concat $args (list "--group-id" (include "berth.groupId" .)) }}
{{- end }}
{{- toYaml $args }}
{{- end }}

{{/* Whether a component's pods get the ServiceAccount token: the adapter and the binder
call the Kubernetes API in Kubernetes mode, and the dashboard asks it who a token is;
nothing else ever does. */}}
{{- define "berth.automountToken" -}}
{{- $root := .root }}
{{- if and $root.Values.kubernetes.enabled (has .component (list "adapter" "binder" "dashboard")) -}}
true
{{- else -}}
{{ $root.Values.serviceAccount.automount }}
{{- end }}
{{- end }}
