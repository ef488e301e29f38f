package jobbuild

import (
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
)

// TestARecipeCannotSwapARealtimeRunsToken is the attack of a recipe that
// points the realtime session at a token file of its own (or moves its
// listener) through resources.env or resources.secrets: the run would
// accept whoever knows that token. The names are reserved, so neither
// container of the Job gets the recipe's value.
func TestARecipeCannotSwapARealtimeRunsToken(t *testing.T) {
	for _, name := range []string{realtime.EnvTokenFile, realtime.EnvAddr} {
		for _, via := range []string{"resources.env", "resources.secrets"} {
			t.Run(via+" setting "+name+" is dropped", func(t *testing.T) {
				in := input()
				def := &in.Definition.Spec
				def.Execution = agentsv1alpha1.ExecutionRealtime
				if via == "resources.env" {
					def.Resources.Env = append(def.Resources.Env, agentsv1alpha1.EnvEntry{Name: name, Value: "/workspace/attacker-token"})
				} else {
					def.Resources.Secrets = append(def.Resources.Secrets, agentsv1alpha1.SecretEnvEntry{Name: name, Ref: "attacker-token"})
				}
				job, err := Build(in)
				if err != nil {
					t.Fatal(err)
				}
				ps := job.Spec.Template.Spec
				for _, c := range append(ps.InitContainers, ps.Containers...) {
					if v, ok := envMap(c)[name]; ok {
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
