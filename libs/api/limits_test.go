package api_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestAdmissionBoundsWhatAnAgentAndARecipeMayCarry creates Agents and
// AgentDefinitions at and over each size and shape limit: a value at a
// limit is accepted, one over it is refused with a message naming the
// field. The attacks are a prompt template and parameters big enough to
// exhaust whoever renders or stores them, and session ids that climb to
// another path of the conversation store or read as a CLI flag.
func TestAdmissionBoundsWhatAnAgentAndARecipeMayCarry(t *testing.T) {
	ns := env.Namespace(t)
	agent := func(mutate func(*agentsv1alpha1.AgentSpec)) client.Object {
		a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{GenerateName: "a-", Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}}
		mutate(&a.Spec)
		return a
	}
	def := func(mutate func(*agentsv1alpha1.AgentDefinitionSpec)) client.Object {
		d := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{GenerateName: "d-", Namespace: ns}, Spec: agentsv1alpha1.AgentDefinitionSpec{Prompt: "p"}}
		mutate(&d.Spec)
		return d
	}
	params := func(kv ...string) func(*agentsv1alpha1.AgentSpec) {
		return func(s *agentsv1alpha1.AgentSpec) {
			s.Parameters = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				s.Parameters[kv[i]] = kv[i+1]
			}
		}
	}
	resume := func(id string) func(*agentsv1alpha1.AgentSpec) {
		return func(s *agentsv1alpha1.AgentSpec) { s.ResumeSession = id }
	}
	conversation := func(id, pin string) func(*agentsv1alpha1.AgentDefinitionSpec) {
		return func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://store", ID: id, Pin: pin}}
		}
	}
	cases := []struct {
		rule string
		obj  client.Object
		// want are the substrings the refusal must hold; none: accepted.
		want []string
	}{
		{"a parameter value of 16384 characters is accepted", agent(params("p", strings.Repeat("x", 16384))), nil},
		{"a 1 MiB parameter value is refused", agent(params("p", strings.Repeat("x", 1<<20))), []string{"spec.parameters", "at most 16384 characters"}},
		{"a parameter value one character over is refused", agent(params("p", strings.Repeat("x", 16385))), []string{"spec.parameters", "16384"}},
		{"a parameter name outside the placeholder characters is refused", agent(params("a b", "v")), []string{"spec.parameters", "each name"}},
		{"a parameter name over 128 characters is refused", agent(params(strings.Repeat("k", 129), "v")), []string{"spec.parameters", "each name"}},
		{"an empty parameter name is refused", agent(params("", "v")), []string{"spec.parameters", "each name"}},
		{"a placeholder-shaped parameter name is accepted", agent(params("a.b-c_D9", "v")), nil},
		{"a Claude session id (UUID) is accepted as resumeSession", agent(resume("3f0c9a52-6d1e-4b8a-9c7f-2a1e5d4b8c90")), nil},
		{"an OpenCode session id is accepted as resumeSession", agent(resume("ses_6b8a1f3c2ffeRkL2mN9pQ4sT7v")), nil},
		{"a resumeSession climbing to another team's store path is refused", agent(resume("../team-b/x")), []string{"spec.resumeSession"}},
		{"a resumeSession that reads as a flag is refused", agent(resume("--dangerously-bypass-approvals-and-sandbox")), []string{"spec.resumeSession"}},
		{"a prompt of 64 KiB is accepted", def(func(s *agentsv1alpha1.AgentDefinitionSpec) { s.Prompt = strings.Repeat("x", 65536) }), nil},
		{"a prompt one byte over 64 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) { s.Prompt = strings.Repeat("x", 65537) }), []string{"spec.prompt", "65536"}},
		{"a description over 16 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) { s.Description = strings.Repeat("x", 16385) }), []string{"spec.description", "16384"}},
		{"an allowed tool over 1 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) { s.AllowedTools = []string{strings.Repeat("x", 1025)} }), []string{"spec.allowed_tools[0]", "1024"}},
		{"a disallowed tool over 1 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) { s.DisallowedTools = []string{strings.Repeat("x", 1025)} }), []string{"spec.disallowed_tools[0]", "1024"}},
		{"an env value over 32 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Env: []agentsv1alpha1.EnvEntry{{Name: "BIG", Value: strings.Repeat("x", 32769)}}}
		}), []string{"spec.resources.env[0].value", "32768"}},
		{"an MCP server argument over 4 KiB is refused", def(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{MCPServers: []agentsv1alpha1.MCPServer{{Name: "m", Transport: "stdio", Command: "srv", Args: []string{strings.Repeat("x", 4097)}}}}
		}), []string{"spec.resources.mcp_servers[0].args[0]", "4096"}},
		{"a conversation id with a slash is refused", def(conversation("team-b/x", "")), []string{"spec.resources.conversation.id"}},
		{"a conversation pin starting with a dash is refused", def(conversation("", "-x")), []string{"spec.resources.conversation.pin"}},
		{"a plain conversation id and pin are accepted", def(conversation("conv-1", "pin_2")), nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			checkAdmission(t, c.obj, c.want)
		})
	}
}

// TestTheCRDsSessionIDPatternIsTheGoOne: the supervisor checks ids with
// agentsv1alpha1.SessionIDPattern, admission with the CRD's pattern; they
// must be the same rule.
func TestTheCRDsSessionIDPatternIsTheGoOne(t *testing.T) {
	found := 0
	for _, crd := range readCRDs(t) {
		for _, v := range crd.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			switch crd.Spec.Names.Kind {
			case "Agent":
				if p := spec.Properties["resumeSession"].Pattern; p != agentsv1alpha1.SessionIDPattern {
					t.Errorf("Agent spec.resumeSession pattern %q, want %q", p, agentsv1alpha1.SessionIDPattern)
				}
				found++
			case "AgentDefinition":
				conv := spec.Properties["resources"].Properties["conversation"]
				for _, f := range []string{"id", "pin"} {
					if p := conv.Properties[f].Pattern; p != agentsv1alpha1.SessionIDPattern {
						t.Errorf("AgentDefinition spec.resources.conversation.%s pattern %q, want %q", f, p, agentsv1alpha1.SessionIDPattern)
					}
				}
				found++
			}
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the 2 CRDs", found)
	}
}
