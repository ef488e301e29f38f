package jobbuild

import (
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
)

// Reserved are the environment variables the controller owns
// (runspec.Reserved). A recipe's resources.env or resources.secrets entry
// with one of these names is dropped, so a recipe can never redirect a
// run's sinks, identity or workspace.
var Reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range runspec.Reserved() {
		m[n] = true
	}
	return m
}()

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

// secret exposes key of agent-secrets as env var name.
func (e *envBuilder) secret(name, key string) {
	if key == "" {
		return
	}
	e.add(secretEnv(name, agentsv1alpha1.AgentSecretsName, key))
}

// secretEnv is env var name holding key of Secret secret. optional: false,
// so a missing key keeps the pod from starting with a clear kubelet event
// rather than running without its credential.
func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: ptr.To(false),
	}}}
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
// template (and its hash) is stable for the same inputs: the contract the
// supervisor reads (runspec.Env), the downward API, the secrets the run
// needs, then the recipe's own variables. The first definition of a name
// wins, so nothing a recipe names can shadow what comes before it.
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
	run := runspec.Env{
		RunSpec:            spec,
		Namespace:          in.Agent.Namespace,
		Agent:              in.Agent.Name,
		UID:                string(in.Agent.UID),
		Station:            in.Station.Name,
		TaskID:             in.Agent.Spec.TaskID,
		Model:              in.Model,
		Execution:          string(def.EffectiveExecution()),
		Workspace:          runspec.WorkspaceDir,
		Home:               runspec.AgentDir,
		Deadline:           time.Duration(in.Station.Spec.DeadlineSeconds())*time.Second - runspec.DeadlineMargin,
		NATSURL:            in.Config.NATSURL,
		SinksJSON:          mustJSON(nonNil(sinks)),
		ConversationSource: conv.Source,
		ConversationID:     conv.ID,
		ConversationPin:    conv.Pin,
		ConversationAuth:   conv.HeadersSecret,
		SkillsSource:       res.SkillsSource,
		SkillsJSON:         mustJSON(nonNil(res.Skills)),
		ReposJSON:          mustJSON(nonNil(res.Repos)),
		TargetRepo:         in.Agent.Spec.TargetRepo,
		Branch:             in.Agent.Spec.Branch,
	}
	if in.Config.RunCredentials() && in.Config.NATSCA {
		run.NATSCAFile = runspec.NATSMountDir + "/" + runspec.NATSCAKey
	}
	if len(out.Select) > 0 {
		run.SelectJSON = mustJSON(out.Select)
	}
	if len(out.Watch) > 0 {
		run.WatchJSON = mustJSON(out.Watch)
	}
	if len(in.Agent.Spec.Parameters) > 0 {
		run.ParametersJSON = mustJSON(in.Agent.Spec.Parameters)
	}
	for _, v := range run.Vars() {
		e.literal(v.Name, v.Value)
	}
	e.add(corev1.EnvVar{Name: runspec.EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	e.add(corev1.EnvVar{Name: runspec.EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	if in.Config.RunCredentials() {
		// Both of the supervisor's steps publish the run's events. The
		// credential comes from a Secret owned by the Agent, so it is in
		// neither the Job nor the Pod spec, and it is never a file: the
		// CLI, under the same uid, could read a file, but not the
		// environment of the (non-dumpable) supervisor.
		e.add(secretEnv(runspec.EnvNATSCreds, runspec.NATSSecretName(string(in.Agent.UID)), runspec.NATSCredsKey))
	}

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
	if conv.HeadersSecret != "" {
		e.secret(conv.HeadersSecret, conv.HeadersSecret)
	}
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
		e.secret(runspec.EnvGitHubToken, firstToken)
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
