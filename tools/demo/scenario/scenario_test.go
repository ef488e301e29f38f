package scenario

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAgentImageSetsEveryStationsAgent: with AgentImage set, the Stations
// the story applies run it, never pulled; other kinds are left alone, and
// without it the recipes keep their image.
func TestAgentImageSetsEveryStationsAgent(t *testing.T) {
	station := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": "Station", "spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "agent", "image": recipeImage}}}}}}}
	}
	other := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{"image": recipeImage}}}
	}
	imageOf := func(u *unstructured.Unstructured) (string, string) {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			v, _, _ := unstructured.NestedString(u.Object, "data", "image")
			return v, ""
		}
		c := cs[0].(map[string]any)
		pull, _ := c["imagePullPolicy"].(string)
		return c["image"].(string), pull
	}
	cases := []struct {
		rule, set           string
		obj                 *unstructured.Unstructured
		wantImage, wantPull string
	}{
		{"a Station's agent runs AgentImage, never pulled", "agentplane/mockagent:1.0.0", station(), "agentplane/mockagent:1.0.0", "Never"},
		{"without AgentImage a Station keeps the recipe's image", "", station(), recipeImage, ""},
		{"other kinds are left alone", "agentplane/mockagent:1.0.0", other(), recipeImage, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			AgentImage = c.set
			defer func() { AgentImage = "" }()
			if err := setAgentImage(c.obj); err != nil {
				t.Fatal(err)
			}
			if img, pull := imageOf(c.obj); img != c.wantImage || pull != c.wantPull {
				t.Errorf("image %q pull %q, want %q %q", img, pull, c.wantImage, c.wantPull)
			}
			if got := agentContainer(); c.obj.GetKind() == "Station" && (got.Image != c.wantImage || string(got.ImagePullPolicy) != c.wantPull) {
				t.Errorf("a recipe built in code runs %q pull %q, want %q %q", got.Image, got.ImagePullPolicy, c.wantImage, c.wantPull)
			}
		})
	}
}
