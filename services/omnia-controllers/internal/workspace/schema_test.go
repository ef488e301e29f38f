package workspace

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestSchemaRefusesInvalidWorkspaces: what one Workspace alone gets wrong
// is refused at admission by the CRD schema, before any controller runs.
func TestSchemaRefusesInvalidWorkspaces(t *testing.T) {
	base := env.Namespace(t)
	groups := func(names ...string) []omniav1.WorkspaceServiceGroup {
		var out []omniav1.WorkspaceServiceGroup
		for _, n := range names {
			out = append(out, omniav1.WorkspaceServiceGroup{Name: n})
		}
		return out
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("g%d", i)
	}
	cases := []struct {
		name  string
		spec  omniav1.WorkspaceSpec
		valid bool
	}{
		{"a DNS-label namespace and distinct groups are accepted",
			omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "team-a"}, Services: groups("default", "voice")}, true},
		{"a namespace name that is not a DNS label is refused",
			omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "Team_A"}}, false},
		{"an empty namespace name is refused",
			omniav1.WorkspaceSpec{}, false},
		{"two service groups with one name are refused",
			omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "team-a"}, Services: groups("default", "default")}, false},
		{"more than 32 service groups are refused",
			omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "team-a"}, Services: groups(many...)}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Server-side dry run: admission and validation without storing.
			ws := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", base, i)}, Spec: tc.spec}
			err := env.Client.Create(context.Background(), ws, client.DryRunAll)
			switch {
			case tc.valid && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.valid && !apierrors.IsInvalid(err):
				t.Fatalf("err %v, want Invalid", err)
			}
		})
	}
}
