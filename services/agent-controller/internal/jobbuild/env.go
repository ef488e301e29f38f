package jobbuild

import (
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
)

// Reserved are the environment variables the controller owns. A recipe's
// resources.env or resources.secrets entry with one of these names is
// dropped, so a recipe can never redirect a run's sinks, identity or
// workspace.
var Reserved = map[string]bool{
	"AGENT_SINKS": true, "AGENT_REPOS": true, "AGENT_SKILLS": true, "AGENT_SKILLS_SOURCE": true,
	"AGENT_CONVERSATION_SOURCE": true, "AGENT_CONVERSATION_ID": true, "AGENT_CONVERSATION_PIN": true,
	"AGENT_CONVERSATION_AUTH": true, "AGENT_SELECT": true, "AGENT_WATCH": true, "WORKSPACE_DIR": true,
	"AGENT_PARAMETERS": true, "TARGET_REPO": true, "BRANCH_NAME": true, "AGENT_MODEL": true,
	"AGENT_NAME": true, "STATION_NAME": true, "TASK_ID": true, "POD_NAME": true, "POD_NAMESPACE": true,
	"AGENT_DEADLINE_MS": true, "HOME": true, "PATH": true, runspec.EnvName: true,
	"AGENT_NAMESPACE": true, "AGENT_UID": true, "AGENT_EXECUTION": true, "AGENT_NATS_URL": true,
}

// HeaderEnvName is the env var an MCP server's headers_secret is exposed
// as; the vendors' MCP config refers to it by this name.
func HeaderEnvName(key string) string { return vendors.MCPHeaderEnvName(key) }

// envBuilder accumulates env vars, refusing duplicates so the first
// definition of a name wins.
type envBuilder struct {
	vars []corev1.EnvVar
	seen map[string]bool
}

func (e *envBuilder) add(v corev1.EnvVar) {
	if v.Name == "" || e.seen[v.Name] {
		return
	}
	e.seen[v.Name] = true
	e.vars = append(e.vars, v)
}

func (e *envBuilder) literal(name, value string) {
	e.add(corev1.EnvVar{Name: name, Value: value})
}

// secret exposes key of agent-secrets as env var name. optional: false, so
// a missing key keeps the pod from starting with a clear kubelet event
// rather than running without its credential.
func (e *envBuilder) secret(name, key string) {
	if key == "" {
		return
	}
	f := false
	e.add(corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: agentsv1alpha1.AgentSecretsName}, Key: key, Optional: &f,
	}}})
}

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		// Only plain structs, slices and maps of strings are encoded here.
		return "null"
	}
	return string(raw)
}

// runEnv is the agent container's environment, in a fixed order so the pod
// template (and its hash) is stable for the same inputs.
func runEnv(in Input, spec string) []corev1.EnvVar {
	def := &in.Definition.Spec
	res, out := resourcesOf(def), outputOf(def)
	e := &envBuilder{seen: map[string]bool{}}

	sinks := append([]agentsv1alpha1.OutputSink(nil), out.Sinks...)
	for i := range sinks {
		if Reserved[sinks[i].HeadersSecret] {
			sinks[i].HeadersSecret = ""
		}
	}
	e.literal("AGENT_SINKS", mustJSON(nonNil(sinks)))
	for _, s := range sinks {
		if s.Type == agentsv1alpha1.SinkType("http") && s.HeadersSecret != "" {
			e.secret(s.HeadersSecret, s.HeadersSecret)
		}
	}
	for _, m := range res.MCPServers {
		if m.HeadersSecret != "" && !Reserved[HeaderEnvName(m.HeadersSecret)] {
			e.secret(HeaderEnvName(m.HeadersSecret), m.HeadersSecret)
		}
	}
	e.literal("AGENT_REPOS", mustJSON(nonNil(res.Repos)))
	e.literal("AGENT_SKILLS", mustJSON(nonNil(res.Skills)))
	e.literal("AGENT_SKILLS_SOURCE", res.SkillsSource)

	conv := agentsv1alpha1.ConversationSpec{}
	if res.Conversation != nil {
		conv = *res.Conversation
	}
	if conv.ID == "" && in.Agent.Spec.ResumeSession != "" {
		// A resumed realtime session restores its conversation from the
		// store like a run continuing conversation.id does.
		conv.ID = in.Agent.Spec.ResumeSession
	}
	if Reserved[conv.HeadersSecret] {
		conv.HeadersSecret = ""
	}
	if conv.HeadersSecret != "" {
		e.secret(conv.HeadersSecret, conv.HeadersSecret)
	}
	e.literal("AGENT_CONVERSATION_AUTH", conv.HeadersSecret)
	e.literal("AGENT_CONVERSATION_SOURCE", conv.Source)
	e.literal("AGENT_CONVERSATION_ID", conv.ID)
	e.literal("AGENT_CONVERSATION_PIN", conv.Pin)
	// The supervisor stops the CLI 10 s before the Job's deadline, so it can
	// report the timeout (exit 124) before the Job controller kills the pod.
	e.literal("AGENT_DEADLINE_MS", strconv.FormatInt(in.Station.Spec.DeadlineSeconds()*1000-10000, 10))

	firstToken := ""
	for _, r := range res.Repos {
		if r.TokenSecret == "" || Reserved[r.TokenSecret] {
			continue
		}
		e.secret(r.TokenSecret, r.TokenSecret)
		if firstToken == "" {
			firstToken = r.TokenSecret
		}
	}
	if firstToken != "" {
		e.secret("GH_TOKEN", firstToken)
	}
	if len(out.Select) > 0 {
		e.literal("AGENT_SELECT", mustJSON(out.Select))
	}
	if len(out.Watch) > 0 {
		e.literal("AGENT_WATCH", mustJSON(out.Watch))
	}
	e.literal("WORKSPACE_DIR", WorkspaceMount)
	if len(in.Agent.Spec.Parameters) > 0 {
		e.literal("AGENT_PARAMETERS", mustJSON(in.Agent.Spec.Parameters))
	}
	if in.Agent.Spec.TargetRepo != "" {
		e.literal("TARGET_REPO", in.Agent.Spec.TargetRepo)
	}
	if in.Agent.Spec.Branch != "" {
		e.literal("BRANCH_NAME", in.Agent.Spec.Branch)
	}
	e.literal("AGENT_MODEL", in.Model)
	e.literal("AGENT_NAME", in.Agent.Name)
	e.literal("AGENT_NAMESPACE", in.Agent.Namespace)
	e.literal("AGENT_UID", string(in.Agent.UID))
	e.literal("STATION_NAME", in.Station.Name)
	e.literal("TASK_ID", in.Agent.Spec.TaskID)
	e.literal("AGENT_EXECUTION", string(def.EffectiveExecution()))
	e.literal(runspec.EnvName, spec)
	if in.Config.NATSURL != "" {
		e.literal("AGENT_NATS_URL", in.Config.NATSURL)
	}
	e.add(corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	e.add(corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	for _, kv := range in.ExtraEnv {
		e.literal(kv.Name, kv.Value)
	}
	for _, v := range res.Env {
		if !Reserved[v.Name] {
			e.literal(v.Name, v.Value)
		}
	}
	for _, s := range res.Secrets {
		if !Reserved[s.Name] {
			e.secret(s.Name, s.Ref)
		}
	}
	e.literal("HOME", AgentMount)
	e.literal("PATH", AgentMount+"/bin:"+AgentMount+"/.local/bin:/usr/local/bin:/usr/bin:/bin")
	return e.vars
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// runSpec freezes what the supervisor runs.
func runSpec(in Input) (string, error) {
	def := &in.Definition.Spec
	s := &runspec.Spec{
		Model:           in.Model,
		Prompt:          def.Prompt,
		Parameters:      in.Agent.Spec.Parameters,
		AllowedTools:    def.AllowedTools,
		DisallowedTools: def.DisallowedTools,
		PermissionMode:  string(def.EffectivePermissionMode()),
		MaxTurns:        def.MaxTurns,
		Execution:       string(def.EffectiveExecution()),
		ResumeSession:   in.Agent.Spec.ResumeSession,
	}
	for _, m := range resourcesOf(def).MCPServers {
		srv := runspec.MCPServer{Name: m.Name, Transport: string(m.Transport), Command: m.Command, Args: m.Args, URL: m.URL}
		if m.HeadersSecret != "" {
			srv.HeaderEnv = HeaderEnvName(m.HeadersSecret)
		}
		s.MCPServers = append(s.MCPServers, srv)
	}
	if strings.EqualFold(in.Model, ExecModel) {
		cmd, err := def.ExecCommand()
		if err != nil {
			return "", err
		}
		s.Command = cmd
	}
	return runspec.Encode(s)
}

// resourcesOf and outputOf read optional blocks without nil checks at every use.
func resourcesOf(def *agentsv1alpha1.AgentDefinitionSpec) agentsv1alpha1.AgentResources {
	if def.Resources == nil {
		return agentsv1alpha1.AgentResources{}
	}
	return *def.Resources
}

func outputOf(def *agentsv1alpha1.AgentDefinitionSpec) agentsv1alpha1.OutputSpec {
	if def.Output == nil {
		return agentsv1alpha1.OutputSpec{}
	}
	return *def.Output
}
