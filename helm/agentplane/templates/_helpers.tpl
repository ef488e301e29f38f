{{- define "agentplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: agentplane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
How to launch a first run, for NOTES.txt; the argument is the namespace
the run goes to. The recipe runs the exec vendor (a shell command printing
vendor-style event lines), so it needs neither an API key nor a network.
*/}}
{{- define "agentplane.firstRun" -}}
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
