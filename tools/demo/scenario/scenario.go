// Package scenario is the demo's story: the recipes in examples/demo, the
// Agents launched against them, what each must end as, and the summary
// table; then a batch run (batch.go), a realtime session (realtime.go) and
// an Omnia rollout (omnia.go), each as the stages it goes through. The
// demo shows it live; the e2e suite asserts it.
package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/vendors"
)

// Run is one Agent the demo launches and the outcome its recipe promises.
type Run struct {
	Name, Station, What string
	Params              map[string]string
	// Phase, ExitCode and Reason (a substring of failureReason) are the
	// promised outcome.
	Phase    agentsv1alpha1.AgentPhase
	ExitCode int32
	Reason   string
}

// Runs are launched in this order; triage-102 queues behind triage-101 on
// the Forbid Station.
var Runs = []Run{
	{"fix-issue-42", "bug-fixer", "succeeds after tool calls", map[string]string{"issue": "42", "repo": "acme/shop"}, agentsv1alpha1.PhaseSucceeded, 0, ""},
	{"review-pr-7", "reviewer", "fails with exit code 3", map[string]string{"pr": "7"}, agentsv1alpha1.PhaseFailed, 3, "BackoffLimitExceeded"},
	{"summarize-week", "summarizer", "hits its one-minute deadline", nil, agentsv1alpha1.PhaseFailed, 124, "deadline exceeded"},
	{"triage-101", "triage", "runs (concurrencyPolicy Forbid)", map[string]string{"issue": "101"}, agentsv1alpha1.PhaseSucceeded, 0, ""},
	{"triage-102", "triage", "queues behind triage-101, then runs", map[string]string{"issue": "102"}, agentsv1alpha1.PhaseSucceeded, 0, ""},
	{"nightly-report", "nightly", "references a Station that does not exist", nil, agentsv1alpha1.PhaseFailed, 1, `Station "nightly" not found`},
}

// AgentImage is, when set, the image of the agent container of every
// Station the story creates (Apply, ApplyBatch, ApplyRealtime), never
// pulled: the demo sets the mockagent image, which localnode runs from its
// image store. Empty keeps the recipes' image (recipeImage), which
// localnode in host mode, as tests/e2e runs it, does not look at.
var AgentImage string

// recipeImage is the agent image the recipes name.
const recipeImage = "agentplane/runner:demo"

// agentContainer is a Station's agent container: the recipes' image, or
// AgentImage when set.
func agentContainer() corev1.Container {
	if AgentImage == "" {
		return corev1.Container{Name: "agent", Image: recipeImage}
	}
	return corev1.Container{Name: "agent", Image: AgentImage, ImagePullPolicy: corev1.PullNever}
}

// setAgentImage gives every container of a Station's pod template
// AgentImage, when set; other objects are left as they are.
func setAgentImage(u *unstructured.Unstructured) error {
	if AgentImage == "" || u.GetKind() != "Station" {
		return nil
	}
	containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return err
	}
	for i, c := range containers {
		if m, ok := c.(map[string]any); ok {
			m["image"], m["imagePullPolicy"] = AgentImage, string(corev1.PullNever)
			containers[i] = m
		}
	}
	return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
}

// Apply creates every object of the YAML manifests in dir in namespace ns
// and reports each on out; a Station's agent runs AgentImage when set.
func Apply(ctx context.Context, c client.Client, ns, dir string, out io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no manifests in %s", dir)
	}
	sort.Strings(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			obj := map[string]any{}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetNamespace(ns)
			if err := setAgentImage(u); err != nil {
				return fmt.Errorf("%s: %s %s: %w", f, u.GetKind(), u.GetName(), err)
			}
			if err := c.Create(ctx, u); err != nil {
				return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
			}
			fmt.Fprintf(out, "  applied %s/%s\n", strings.ToLower(u.GetKind()), u.GetName())
		}
	}
	return nil
}

// Launch creates the Agents of Runs in ns.
func Launch(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	for _, r := range Runs {
		a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: ns},
			Spec: agentsv1alpha1.AgentSpec{StationRef: r.Station, Parameters: r.Params, TaskID: "demo-" + r.Name}}
		if err := c.Create(ctx, a); err != nil {
			return fmt.Errorf("create Agent %s: %w", r.Name, err)
		}
		fmt.Fprintf(out, "  created agent/%-15s in Station %-11s — %s\n", r.Name, r.Station, r.What)
	}
	return nil
}

// Check compares a finished Agent with its promised outcome; "" when it
// keeps the promise.
func (r Run) Check(a *agentsv1alpha1.Agent) string {
	switch {
	case a.Status.Phase != r.Phase:
		return fmt.Sprintf("%s: phase %s, promised %s (reason %q)", r.Name, a.Status.Phase, r.Phase, a.Status.FailureReason)
	case a.Status.ExitCode == nil || *a.Status.ExitCode != r.ExitCode:
		return fmt.Sprintf("%s: exit code %v, promised %d", r.Name, a.Status.ExitCode, r.ExitCode)
	case r.Reason != "" && !strings.Contains(a.Status.FailureReason, r.Reason):
		return fmt.Sprintf("%s: failureReason %q, promised one mentioning %q", r.Name, a.Status.FailureReason, r.Reason)
	}
	return ""
}

// Summary prints one row per Agent of ns, from the Agents' status: the same
// facts `kubectl get agents` shows, plus vendor, duration and reason.
func Summary(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	list := &agentsv1alpha1.AgentList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	models := map[string]string{}
	defs := &agentsv1alpha1.AgentDefinitionList{}
	stations := &agentsv1alpha1.StationList{}
	if c.List(ctx, defs, client.InNamespace(ns)) == nil && c.List(ctx, stations, client.InNamespace(ns)) == nil {
		byDef := map[string]string{}
		for _, d := range defs.Items {
			byDef[d.Name] = d.Spec.Model
		}
		for _, st := range stations.Items {
			models[st.Name] = byDef[st.Spec.AgentDefRef]
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGENT\tSTATION\tVENDOR\tPHASE\tEXIT\tDURATION\tFAILURE REASON")
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for _, a := range list.Items {
		vendor := "-"
		if m, ok := models[a.Spec.StationRef]; ok {
			vendor = vendors.Route(m).Name()
		}
		exit, dur := "-", "-"
		if a.Status.ExitCode != nil {
			exit = fmt.Sprint(*a.Status.ExitCode)
		}
		if a.Status.StartedAt != nil && a.Status.CompletedAt != nil {
			dur = a.Status.CompletedAt.Sub(a.Status.StartedAt.Time).String()
		}
		reason := a.Status.FailureReason
		if r := []rune(reason); len(r) > 70 {
			reason = string(r[:69]) + "…"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Spec.StationRef, vendor, a.Status.Phase, exit, dur, reason)
	}
	return tw.Flush()
}
