{{/*
The resources of one berth service, shared by templates/<component>/*.yaml.
Each takes (dict "root" $ "component" "queue|scheduler|binder").
*/}}

{{- define "berth.deployment" -}}
{{- $root := .root }}
{{- include "berth.kubeProfileCheck" $root }}
{{- $values := index $root.Values .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "berth.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "berth.componentLabels" . | nindent 4 }}
spec:
  {{- if not $values.autoscaling.enabled }}
  replicas: {{ include "berth.capReplicas" (dict "root" $root "component" .component "value" $values.replicaCount) }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "berth.componentSelectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        {{- include "berth.componentLabels" . | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # Roll the pods when the KubeSchedulerConfiguration changes (it is read at start).
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "berth.serviceAccountName" . }}
      automountServiceAccountToken: {{ include "berth.automountToken" . }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ include "berth.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command:
            {{- include "berth.command" . | nindent 12 }}
          env:
            {{- include "berth.env" . | nindent 12 }}
          ports:
            - name: http-metrics
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
            {{- if eq .component "dashboard" }}
            - name: http
              containerPort: {{ $values.port }}
              protocol: TCP
            {{- end }}
          {{- if $root.Values.probes.enabled }}
          startupProbe:
            {{- toYaml $root.Values.probes.startup | nindent 12 }}
          livenessProbe:
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          {{- end }}
          {{- with $values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/berth
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- if and (eq .component "dashboard") $values.tokensSecret }}
            - name: tokens
              mountPath: /etc/berth-tokens
              readOnly: true
            {{- end }}
            {{- include "berth.securityMounts" $root | nindent 12 }}
            {{- include "berth.messageKeysMount" . | nindent 12 }}
      volumes:
        - name: config
          configMap:
            name: {{ include "berth.configMapName" $root }}
        - name: tmp
          emptyDir: {}
        {{- if and (eq .component "dashboard") $values.tokensSecret }}
        - name: tokens
          secret:
            secretName: {{ $values.tokensSecret }}
            defaultMode: 0440
        {{- end }}
        {{- include "berth.securityVolumes" $root | nindent 8 }}
        {{- include "berth.messageKeysVolume" . | nindent 8 }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{- define "berth.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "berth.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "berth.componentLabels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "berth.componentSelectorLabels" . | nindent 4 }}
  ports:
    - name: http-metrics
      port: {{ .root.Values.metrics.port }}
      targetPort: http-metrics
      protocol: TCP
    {{- if eq .component "dashboard" }}
    - name: http
      port: {{ .root.Values.dashboard.port }}
      targetPort: http
      protocol: TCP
    {{- end }}
{{- end }}

{{- define "berth.hpa" -}}
{{- $root := .root }}
{{- $values := index $root.Values .component }}
{{- if $values.autoscaling.enabled }}
{{- $auto := $values.autoscaling }}
{{- $max := include "berth.capReplicas" (dict "root" $root "component" .component "value" $auto.maxReplicas) | int }}
{{- $min := include "berth.capReplicas" (dict "root" $root "component" .component "value" $auto.minReplicas) | int }}
{{- if gt $min $max }}
{{- fail (printf "%s.autoscaling.minReplicas (%d) is above maxReplicas (%d)" .component $min $max) }}
{{- end }}
{{- $selector := merge (dict "topic" (include "berth.topicName" (dict "root" $root "topic" $auto.lagTopic))) $auto.metricSelector }}
{{- $metric := dict "name" "berth_consumer_lag" "selector" (dict "matchLabels" $selector) }}
{{- $target := dict "type" "AverageValue" "averageValue" ($auto.targetLagPerReplica | toString) -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "berth.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "berth.componentLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "berth.componentName" . }}
  minReplicas: {{ $min }}
  maxReplicas: {{ $max }}
  metrics:
    {{- if eq $auto.metricType "External" }}
    - type: External
      external:
        metric:
          {{- toYaml $metric | nindent 10 }}
        target:
          {{- toYaml $target | nindent 10 }}
    {{- else }}
    - type: Pods
      pods:
        metric:
          {{- toYaml $metric | nindent 10 }}
        target:
          {{- toYaml $target | nindent 10 }}
    {{- end }}
  {{- with $auto.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{- define "berth.pdb" -}}
{{- $values := index .root.Values .component }}
{{- if $values.pdb.enabled -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "berth.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "berth.componentLabels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" $values.pdb.minAvailable) }}
  minAvailable: {{ $values.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $values.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "berth.componentSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{- define "berth.serviceMonitor" -}}
{{- $monitor := .root.Values.metrics.serviceMonitor }}
{{- if $monitor.enabled -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "berth.componentName" . }}
  namespace: {{ default .root.Release.Namespace $monitor.namespace }}
  labels:
    {{- include "berth.componentLabels" . | nindent 4 }}
    {{- with $monitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  jobLabel: app.kubernetes.io/component
  namespaceSelector:
    matchNames:
      - {{ .root.Release.Namespace }}
  selector:
    matchLabels:
      {{- include "berth.componentSelectorLabels" . | nindent 6 }}
  endpoints:
    - port: http-metrics
      path: /metrics
      interval: {{ $monitor.interval }}
      scrapeTimeout: {{ $monitor.scrapeTimeout }}
      {{- with $monitor.relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $monitor.metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end }}
