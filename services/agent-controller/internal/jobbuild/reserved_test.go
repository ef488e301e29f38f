package jobbuild

import (
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
)

// TestARecipeCannotSwapARealtimeRunsToken is the attack of a recipe that
// hands the realtime session a token of its own (or moves its listener),
// or the run a NATS credential of its own, through resources.env or
// resources.secrets: the run would accept whoever knows that token, or
// publish as another user. The names are reserved, so no container of the
// Job gets the recipe's value; where the controller sets the name, it is
// the controller's.
func TestARecipeCannotSwapARealtimeRunsToken(t *testing.T) {
	for _, name := range []string{realtime.EnvToken, realtime.EnvAddr, runspec.EnvNATSCreds} {
		for _, via := range []string{"resources.env", "resources.secrets"} {
			t.Run(via+" setting "+name+" is dropped", func(t *testing.T) {
				in := input()
				in.Config.NATSCredentials = true
				def := &in.Definition.Spec
				def.Execution = agentsv1alpha1.ExecutionRealtime
				if via == "resources.env" {
					def.Resources.Env = append(def.Resources.Env, agentsv1alpha1.EnvEntry{Name: name, Value: "attacker-token"})
				} else {
					def.Resources.Secrets = append(def.Resources.Secrets, agentsv1alpha1.SecretEnvEntry{Name: name, Ref: "attacker-token"})
				}
				job, err := Build(in)
				if err != nil {
					t.Fatal(err)
				}
				ps := job.Spec.Template.Spec
				for _, c := range append(ps.InitContainers, ps.Containers...) {
					v, ok := envMap(c)[name]
					if !ok {
						continue
					}
					if v.Value == "attacker-token" || v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil &&
						(v.ValueFrom.SecretKeyRef.Name == agentsv1alpha1.AgentSecretsName || v.ValueFrom.SecretKeyRef.Key == "attacker-token") {
						t.Fatalf("container %s runs with the recipe's %s=%+v", c.Name, name, v)
					}
				}
				if _, ok := envMap(agentContainer(t, job))["FOO"]; !ok {
					t.Fatal("the recipe's ordinary variable FOO was dropped too")
				}
			})
		}
	}
}
