package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestFacadeReportAdmission writes per-pod session reports to an
// AgentRuntime's status, each breaking one rule of status.facadeReports
// or keeping them all; a refusal must name the field.
func TestFacadeReportAdmission(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	a := &omniav1alpha1.AgentRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: omniav1alpha1.AgentRuntimeSpec{
			PromptPackRef: omniav1alpha1.PromptPackRef{Name: "support"},
			Facades:       []omniav1alpha1.FacadeConfig{{Type: omniav1alpha1.FacadeTypeWebSocket}},
		},
	}
	if err := env.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	report := func(pod string, n int32) omniav1alpha1.FacadeReport {
		return omniav1alpha1.FacadeReport{Pod: pod, ActiveSessions: n, LastActivityTime: &metav1.Time{}}
	}
	many := make([]omniav1alpha1.FacadeReport, 513)
	for i := range many {
		many[i] = report(fmt.Sprintf("agent-%d", i), 0)
	}
	cases := []struct {
		rule    string
		reports []omniav1alpha1.FacadeReport
		// want are the substrings the refusal must hold; none: accepted.
		want []string
	}{
		{"a pod's report with a pod name and a count is accepted",
			[]omniav1alpha1.FacadeReport{report("agent-7d4b9c-x2x9z", 3), report("agent-7d4b9c-abcde", 0)}, nil},
		{"a negative session count is refused",
			[]omniav1alpha1.FacadeReport{report("agent-1", -1)}, []string{"status.facadeReports[0].activeSessions"}},
		{"a pod name that is no DNS subdomain is refused",
			[]omniav1alpha1.FacadeReport{report("Agent_1", 0)}, []string{"status.facadeReports[0].pod"}},
		{"an empty pod name is refused",
			[]omniav1alpha1.FacadeReport{report("", 0)}, []string{"status.facadeReports[0].pod"}},
		{"two reports of one pod are refused",
			[]omniav1alpha1.FacadeReport{report("agent-1", 1), report("agent-1", 2)}, []string{"status.facadeReports[1]", "Duplicate"}},
		{"more reports than 512 are refused", many, []string{"status.facadeReports", "512"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cur := &omniav1alpha1.AgentRuntime{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
				t.Fatal(err)
			}
			cur.Status.FacadeReports = c.reports
			err := env.Client.Status().Update(ctx, cur)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v; want a validation refusal", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not name %q: %.2000s", w, err.Error())
				}
			}
		})
	}
}
