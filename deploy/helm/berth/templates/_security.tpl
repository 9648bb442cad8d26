{{/*
Secured connections (shared.runtime.security): the Redis password and the Kafka SASL password from
Secrets (secretKeyRef), TLS CAs and client certificates from Secret volumes under
/etc/berth-tls. The combinations shared.runtime.security refuses are refused here first, in the same
words.
*/}}

{{/* Fails on a combination the services would refuse. */}}
{{- define "berth.securityChecks" -}}
{{- $redis := .Values.redis }}
{{- $kafka := .Values.kafka }}
{{- if regexMatch "^rediss?://[^/@]*:[^/@]*@" $redis.url }}
{{- fail "redis.url carries a password: it would be readable in the Deployments' env and the release notes. Put it in a Secret: redis.existingSecret with passwordKey (the user may stay in the URL)" }}
{{- end }}
{{- if and $redis.users.enabled (not $redis.existingSecret) }}
{{- fail "redis.users.enabled needs redis.existingSecret (the Secret holding each component's <component>-password)" }}
{{- end }}
{{- if and $redis.passwordKey (not $redis.existingSecret) }}
{{- fail "redis.passwordKey needs redis.existingSecret (the Secret holding the password)" }}
{{- end }}
{{- $urlFromSecret := and $redis.existingSecret $redis.existingSecretKey }}
{{- if and $redis.tls.existingSecret (not $urlFromSecret) (not (hasPrefix "rediss://" $redis.url)) }}
{{- fail (printf "redis.tls.existingSecret set, but redis.url %q is not TLS: use a rediss:// URL" $redis.url) }}
{{- end }}
{{- range $name, $tls := dict "redis" $redis.tls "kafka" $kafka.tls }}
{{- if and $tls.keyKey (not $tls.certKey) }}
{{- fail (printf "%s.tls.keyKey needs %s.tls.certKey" $name $name) }}
{{- end }}
{{- if and (or $tls.certKey $tls.keyKey) (not $tls.existingSecret) }}
{{- fail (printf "%s.tls.certKey/keyKey need %s.tls.existingSecret" $name $name) }}
{{- end }}
{{- end }}
{{- $protocol := $kafka.securityProtocol }}
{{- $sasl := hasPrefix "SASL_" $protocol }}
{{- $tls := or (eq $protocol "SSL") (eq $protocol "SASL_SSL") }}
{{- if and $kafka.tls.existingSecret (not $tls) }}
{{- fail (printf "kafka.tls.existingSecret set, but kafka.securityProtocol=%s does not use TLS (use SSL or SASL_SSL)" $protocol) }}
{{- end }}
{{- if and (not $sasl) (or $kafka.sasl.mechanism $kafka.sasl.username $kafka.sasl.existingSecret $kafka.sasl.users.enabled) }}
{{- fail (printf "kafka.sasl set, but kafka.securityProtocol=%s does not authenticate with SASL (use SASL_SSL, or SASL_PLAINTEXT)" $protocol) }}
{{- end }}
{{- if $sasl }}
{{- if not $kafka.sasl.mechanism }}
{{- fail (printf "kafka.securityProtocol=%s needs kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)" $protocol) }}
{{- end }}
{{- if $kafka.sasl.users.enabled }}
{{- if not $kafka.sasl.existingSecret }}
{{- fail "kafka.sasl.users.enabled needs kafka.sasl.existingSecret (the Secret holding each component's <component>-password)" }}
{{- end }}
{{- else if not (and $kafka.sasl.username $kafka.sasl.existingSecret) }}
{{- fail (printf "SASL %s needs kafka.sasl.username and kafka.sasl.existingSecret (the Secret holding the password)" $kafka.sasl.mechanism) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The environment of the secured connections (after BERTH_REDIS_URL). */}}
{{- define "berth.securityEnv" -}}
{{- $redis := .Values.redis }}
{{- $kafka := .Values.kafka }}
{{- if and $redis.passwordKey (not $redis.users.enabled) }}
- name: BERTH_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $redis.existingSecret }}
      key: {{ $redis.passwordKey }}
{{- end }}
{{- include "berth.tlsEnv" (dict "tls" $redis.tls "prefix" "BERTH_REDIS" "dir" "/etc/berth-tls/redis") }}
{{- if ne $kafka.securityProtocol "PLAINTEXT" }}
- name: BERTH_KAFKA_SECURITY_PROTOCOL
  value: {{ $kafka.securityProtocol | quote }}
{{- end }}
{{- if hasPrefix "SASL_" $kafka.securityProtocol }}
- name: BERTH_KAFKA_SASL_MECHANISM
  value: {{ $kafka.sasl.mechanism | quote }}
{{- if not $kafka.sasl.users.enabled }}
- name: BERTH_KAFKA_SASL_USERNAME
  value: {{ $kafka.sasl.username | quote }}
- name: BERTH_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $kafka.sasl.existingSecret }}
      key: {{ $kafka.sasl.passwordKey }}
{{- end }}
{{- end }}
{{- include "berth.tlsEnv" (dict "tls" $kafka.tls "prefix" "BERTH_KAFKA" "dir" "/etc/berth-tls/kafka") }}
{{- end }}

{{/* (dict "tls" <values.tls> "prefix" "BERTH_REDIS" "dir" <mount path>) -> _CA/_CERT/_KEY */}}
{{- define "berth.tlsEnv" -}}
{{- if .tls.existingSecret }}
{{- range $suffix, $key := dict "CA" .tls.caKey "CERT" .tls.certKey "KEY" .tls.keyKey }}
{{- if $key }}
- name: {{ printf "%s_%s" $.prefix $suffix }}
  value: {{ printf "%s/%s" $.dir $key | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Volume mounts of the TLS Secrets. */}}
{{- define "berth.securityMounts" -}}
{{- range $name, $tls := dict "redis" .Values.redis.tls "kafka" .Values.kafka.tls }}
{{- if $tls.existingSecret }}
- name: {{ $name }}-tls
  mountPath: /etc/berth-tls/{{ $name }}
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/* The TLS Secrets as volumes: only the named keys, readable by the pod's group (fsGroup). */}}
{{- define "berth.securityVolumes" -}}
{{- range $name, $tls := dict "redis" .Values.redis.tls "kafka" .Values.kafka.tls }}
{{- if $tls.existingSecret }}
- name: {{ $name }}-tls
  secret:
    secretName: {{ $tls.existingSecret }}
    defaultMode: 288  # 0440
    items:
      {{- range $key := list $tls.caKey $tls.certKey $tls.keyKey | compact }}
      - key: {{ $key }}
        path: {{ $key }}
      {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret holding the message keys (messageKeys.existingSecret, or the chart's own). */}}
{{- define "berth.messageKeysSecret" -}}
{{- .Values.messageKeys.existingSecret | default (printf "%s-message-keys" (include "berth.fullname" . | trunc 50 | trimSuffix "-")) }}
{{- end }}

{{/*
The message keys a component holds: its own (it signs) and those of the components it reads
(it verifies). Takes (dict "root" $ "component" NAME); empty for a component without Kafka.
*/}}
{{- define "berth.messageKeyComponents" -}}
{{- $needs := dict "queue" (list "queue" "scheduler" "binder") "scheduler" (list "queue" "scheduler") "binder" (list "scheduler" "binder") "adapter" (list "scheduler" "binder") "dashboard" (list "queue" "scheduler" "binder") }}
{{- join " " (get $needs .component | default list) }}
{{- end }}

{{- define "berth.messageKeysEnv" -}}
{{- if include "berth.messageKeyComponents" . }}
- name: BERTH_MESSAGE_KEYS
  value: /etc/berth-message-keys
{{- end }}
{{- end }}

{{- define "berth.messageKeysMount" -}}
{{- if include "berth.messageKeyComponents" . }}
- name: message-keys
  mountPath: /etc/berth-message-keys
  readOnly: true
{{- end }}
{{- end }}

{{- define "berth.messageKeysVolume" -}}
{{- $components := include "berth.messageKeyComponents" . }}
{{- if $components }}
- name: message-keys
  secret:
    secretName: {{ include "berth.messageKeysSecret" .root }}
    defaultMode: 288  # 0440
    items:
      {{- range $component := splitList " " $components }}
      - key: {{ $component }}
        path: {{ $component }}
      {{- end }}
{{- end }}
{{- end }}

{{/* A list of files/redis-acl.yaml (commands or key patterns; {group: name} items expanded
from its groups), $STORE and $QUEUE substituted, duplicates dropped: a JSON array.
Arguments: items, acl (the loaded file), store, queue (glob-escaped prefixes). */}}
{{- define "berth.aclExpand" -}}
{{- $out := list }}
{{- $acl := .acl }}
{{- range .items }}
{{- if kindIs "map" . }}
{{- $out = concat $out (index $acl.groups .group) }}
{{- else }}
{{- $out = append $out . }}
{{- end }}
{{- end }}
{{- $done := list }}
{{- range $out }}
{{- $done = append $done (. | replace "$STORE" $.store | replace "$QUEUE" $.queue) }}
{{- end }}
{{- toJson (uniq $done) }}
{{- end }}
