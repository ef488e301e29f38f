{{/* The value of the app.kubernetes.io/component label. */}}
{{- define "batch-poller.component" -}}
batch-gateway
{{- end }}

{{/*
Shared helpers. Every agentplane chart carries this same block, with only
its own chart name as the prefix (a test in tests/helm keeps the copies
identical); the lines above it are the chart's own.
*/}}

{{/* The chart's name, used in the app.kubernetes.io/name label. */}}
{{- define "batch-poller.name" -}}
{{- .Chart.Name -}}
{{- end }}

{{/*
The name of the namespaced objects: the chart's name unless fullnameOverride
is set. It is not prefixed with the release name, so other charts and the
docs can reach a Service by a known name (batch-poller.<namespace>.svc);
one release of each chart per namespace.
*/}}
{{- define "batch-poller.fullname" -}}
{{- default .Chart.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
The name of cluster-scoped objects (ClusterRoles and their bindings): the
release namespace, then the full name, so installs in two namespaces do not
collide.
*/}}
{{- define "batch-poller.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "batch-poller.fullname" .) -}}
{{- end }}

{{- define "batch-poller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "batch-poller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "batch-poller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "batch-poller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ include "batch-poller.component" . }}
app.kubernetes.io/part-of: agentplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "batch-poller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "batch-poller.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{/* repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "batch-poller.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end }}

{{/*
One container argument, "--<name>=<value>", from a list of the flag's name
and its value; nothing when the value is nil or empty, so that the binary's
own default applies. Whole numbers (YAML gives them as floats) print
without a fraction or an exponent.
*/}}
{{- define "batch-poller.flag" -}}
{{- $name := index . 0 -}}
{{- $value := index . 1 -}}
{{- if kindIs "float64" $value -}}
{{- if eq $value (floor $value) -}}
{{- $value = int64 $value -}}
{{- end -}}
{{- end -}}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) -}}
{{- printf "--%s=%v" $name $value -}}
{{- end -}}
{{- end }}

{{/*
The container's args as a YAML list: the flags given as a list of
(name, value) pairs, each rendered by the flag helper above, then extraArgs.
*/}}
{{- define "batch-poller.args" -}}
{{- $args := list -}}
{{- range .flags -}}
{{- $arg := include "batch-poller.flag" . -}}
{{- if $arg -}}
{{- $args = append $args $arg -}}
{{- end -}}
{{- end -}}
{{- toYaml (concat $args .root.Values.extraArgs) -}}
{{- end }}

{{/* The flags every service takes. */}}
{{- define "batch-poller.commonFlags" -}}
{{- $v := .Values -}}
{{- toJson (list
  (list "log-level" $v.logLevel)
  (list "metrics-bind-address" (printf ":%d" (int $v.ports.metrics)))
  (list "health-probe-bind-address" (printf ":%d" (int $v.ports.health)))
  (list "kube-api-qps" $v.kubeApiQps)
  (list "kube-api-burst" $v.kubeApiBurst)
  (list "shutdown-timeout" $v.shutdownTimeout)
) -}}
{{- end }}

{{/*
Leader election: the chart always says whether it is on and the Lease's
name, since the RBAC it renders depends on them; the timings only when set.
*/}}
{{- define "batch-poller.leaderElectionFlags" -}}
{{- $le := .Values.leaderElection -}}
{{- $flags := list (list "leader-elect" $le.enabled) -}}
{{- if $le.enabled -}}
{{- $flags = concat $flags (list
  (list "leader-election-id" $le.id)
  (list "leader-election-namespace" $le.namespace)
  (list "leader-elect-lease-duration" $le.leaseDuration)
  (list "leader-elect-renew-deadline" $le.renewDeadline)
  (list "leader-elect-retry-period" $le.retryPeriod)
) -}}
{{- end -}}
{{- toJson $flags -}}
{{- end }}

{{/* The namespace of the leader-election Lease and of its Role. */}}
{{- define "batch-poller.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end }}

{{- define "batch-poller.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "batch-poller.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The pod's name and namespace from the downward API, then extraEnv. */}}
{{- define "batch-poller.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
NATS authentication (docs/security.md), for the charts whose service
connects to NATS: the Secret nats.credentialsSecret (key user.creds) and
the Secret nats.caSecret, default global.nats.caSecret (key ca.crt), each
mounted read-only with mode 0400 (the pod's fsGroup lets the service read
it) and passed as --nats-creds-file and --nats-ca-file. Only the named key
is mounted: a Secret without it stops the pod from starting, rather than
the service connecting without it. As JSON: flags, volumes and
volumeMounts, each empty without the Secrets.
*/}}
{{- define "batch-poller.natsAuth" -}}
{{- $nats := .Values.nats | default dict -}}
{{- $ca := default (dig "nats" "caSecret" "" (.Values.global | default dict)) $nats.caSecret -}}
{{- $out := dict "flags" (list) "volumes" (list) "volumeMounts" (list) -}}
{{- range list (list "credentials" $nats.credentialsSecret "user.creds" "nats-creds-file") (list "ca" $ca "ca.crt" "nats-ca-file") -}}
{{- $secret := index . 1 -}}
{{- if $secret -}}
{{- $volume := printf "nats-%s" (index . 0) -}}
{{- $dir := printf "/etc/agentplane/nats/%s" (index . 0) -}}
{{- $key := index . 2 -}}
{{- $_ := set $out "flags" (append $out.flags (list (index . 3) (printf "%s/%s" $dir $key))) -}}
{{- $_ := set $out "volumes" (append $out.volumes (dict "name" $volume "secret" (dict "secretName" $secret "defaultMode" 256 "items" (list (dict "key" $key "path" $key))))) -}}
{{- $_ := set $out "volumeMounts" (append $out.volumeMounts (dict "name" $volume "mountPath" $dir "readOnly" true)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{- define "batch-poller.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  initialDelaySeconds: 5
  periodSeconds: 15
  timeoutSeconds: 5
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  initialDelaySeconds: 3
  periodSeconds: 10
  timeoutSeconds: 5
{{- end }}

{{/*
The pod template's labels and annotations: podLabels never replace the
selector labels; podAnnotations may replace the prometheus.io ones.
*/}}
{{- define "batch-poller.podMetadata" -}}
{{- $labels := merge (fromYaml (include "batch-poller.selectorLabels" .)) (dict "app.kubernetes.io/component" (include "batch-poller.component" .) "app.kubernetes.io/part-of" "agentplane") (.Values.podLabels | default dict) -}}
{{- $annotations := merge (deepCopy (.Values.podAnnotations | default dict)) (dict "prometheus.io/scrape" "true" "prometheus.io/port" (.Values.ports.metrics | int | toString) "prometheus.io/path" "/metrics") -}}
labels:
  {{- toYaml $labels | nindent 2 }}
annotations:
  {{- toYaml $annotations | nindent 2 }}
{{- end }}

{{/* imagePullSecrets, nodeSelector, tolerations and affinity, when set. */}}
{{- define "batch-poller.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "batch-poller.serviceAccount" -}}
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "batch-poller.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: true
{{- end }}
{{- end }}

{{/*
The Service: the metrics port, and the gRPC port for the charts that have
one (ports.grpc). service.type and service.annotations apply where the
chart offers them (realtime-gateway).
*/}}
{{- define "batch-poller.service" -}}
{{- $svc := .Values.service | default dict -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "batch-poller.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" . | nindent 4 }}
  {{- with $svc.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $svc.type | default "ClusterIP" }}
  selector:
    {{- include "batch-poller.selectorLabels" . | nindent 4 }}
  ports:
    {{- if hasKey .Values.ports "grpc" }}
    - name: grpc
      port: {{ .Values.ports.grpc }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    {{- end }}
    - name: metrics
      port: {{ .Values.ports.metrics }}
      targetPort: metrics
      protocol: TCP
{{- end }}

{{/*
The PodDisruptionBudget: minAvailable when set, else maxUnavailable.
*/}}
{{- define "batch-poller.podDisruptionBudget" -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if $pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "batch-poller.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- include "batch-poller.selectorLabels" . | nindent 6 }}
  {{- if not (kindIs "invalid" $pdb.minAvailable) }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable | default 1 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* A Prometheus Operator ServiceMonitor, only when enabled. */}}
{{- define "batch-poller.serviceMonitor" -}}
{{- $sm := .Values.serviceMonitor -}}
{{- if $sm.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "batch-poller.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" . | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "batch-poller.selectorLabels" . | nindent 6 }}
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  endpoints:
    - port: metrics
      path: /metrics
      # The services export a namespace label of their own (the Agent's or
      # the object's namespace, as kube-state-metrics does): keep it rather
      # than rename it exported_namespace.
      honorLabels: true
      {{- with $sm.interval }}
      interval: {{ . }}
      {{- end }}
      {{- with $sm.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
{{- end }}
{{- end }}

{{/*
The chart's alert rules as a monitoring.coreos.com/v1 PrometheusRule, only
when prometheusRule.enabled (it needs the Prometheus Operator's CRDs): the
groups of files/prometheus/*.rules.yaml, which `make generate` copies from
deploy/prometheus, where a plain Prometheus reads the same file. Each
alert's runbook is in docs/operations.md. The file is read as data, not
as a template: the {{ $labels }} and {{ $value }} in its annotations are
Prometheus's.
*/}}
{{- define "batch-poller.prometheusRule" -}}
{{- $r := .Values.prometheusRule -}}
{{- if $r.enabled }}
{{- range $path, $_ := .Files.Glob "files/prometheus/*.rules.yaml" }}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "batch-poller.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" $ | nindent 4 }}
    {{- with $r.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- $.Files.Get $path | fromYaml | toYaml | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The chart's Grafana dashboards, only when dashboards.enabled: one ConfigMap
per files/dashboards/*.json (written by `make generate` from
tools/dashboards), labelled for Grafana's dashboard sidecar
(dashboards.label: dashboards.labelValue), in dashboards.namespace or the
release namespace. The data key is the file's name, its value the file
byte for byte (a JSON string: a block scalar would lose the final newline).
*/}}
{{- define "batch-poller.dashboards" -}}
{{- $d := .Values.dashboards -}}
{{- if $d.enabled }}
{{- range $path, $_ := .Files.Glob "files/dashboards/*.json" }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-dashboard" (base $path | trimSuffix ".json") }}
  namespace: {{ default $.Release.Namespace $d.namespace }}
  labels:
    {{- include "batch-poller.labels" $ | nindent 4 }}
    {{ $d.label | quote }}: {{ $d.labelValue | quote }}
  {{- with $d.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  {{ base $path }}: {{ $.Files.Get $path | toJson }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A NetworkPolicy on ingress, only when enabled: the health port from
anywhere (kubelet probes), the metrics port from networkPolicy.metricsFrom
and, where there is one, the gRPC port from networkPolicy.grpcFrom. An
empty list of peers admits every source. Egress is not restricted.
*/}}
{{- define "batch-poller.networkPolicy" -}}
{{- $np := .Values.networkPolicy -}}
{{- if $np.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "batch-poller.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "batch-poller.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "batch-poller.selectorLabels" . | nindent 6 }}
  policyTypes:
    - Ingress
  ingress:
    - ports:
        - port: health
          protocol: TCP
    - ports:
        - port: metrics
          protocol: TCP
      {{- with $np.metricsFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- if hasKey .Values.ports "grpc" }}
    - ports:
        - port: grpc
          protocol: TCP
      {{- with $np.grpcFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
{{- end }}
{{- end }}

{{/*
How to launch a first run, for NOTES.txt; the argument is the namespace
the run goes to. The recipe runs the exec vendor (a shell command printing
vendor-style event lines), so it needs neither an API key nor a network.
*/}}
{{- define "batch-poller.firstRun" -}}
Launch a first run. Create a recipe (an AgentDefinition) and the Station it runs on
(the same as examples/agents/40-exec-echo.yaml in the repository):

  kubectl -n {{ . }} apply -f - <<'EOF'
  apiVersion: agents.re-cinq.com/v1alpha1
  kind: AgentDefinition
  metadata:
    name: echo
  spec:
    model: exec
    prompt: "Hello from {who}."
    tool_config:
      command:
        - sh
        - -c
        - |
          printf '{"type":"result","subtype":"success","is_error":false,"result":"%s"}\n' "$1"
        - echo-agent
    output:
      sinks:
        - type: stdout
  ---
  apiVersion: agents.re-cinq.com/v1alpha1
  kind: Station
  metadata:
    name: echo
  spec:
    agentDefRef: echo
    deadlineMinutes: 5
    template:
      spec:
        containers:
          - name: agent
            image: busybox:1.37
  EOF

Then launch an Agent (one run) on that Station, with agentctl:

  agentctl -n {{ . }} run --station echo --param who=me --follow --wait

or with kubectl:

  kubectl -n {{ . }} create -f - <<'EOF'
  apiVersion: agents.re-cinq.com/v1alpha1
  kind: Agent
  metadata:
    generateName: echo-
  spec:
    stationRef: echo
    parameters:
      who: me
  EOF
  kubectl -n {{ . }} get agents -w      # Pending -> Running -> Succeeded
{{- end }}
