package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// fieldList collects describe's fields; a field with no value is left
// out, so describe shows what is set.
type fieldList []field

func (l *fieldList) add(label, value string) {
	if value != "" {
		*l = append(*l, field{label, value})
	}
}

// phase is always shown: an object without one has not been reconciled.
func (l *fieldList) phase(p string) {
	if p == "" {
		p = none
	}
	*l = append(*l, field{"Phase", p})
}

func describeAgent(o client.Object, now time.Time) ([]field, []section) {
	a := o.(*agentsv1alpha1.Agent)
	var l fieldList
	l.phase(string(a.Status.Phase))
	l.add("Station", a.Spec.StationRef)
	l.add("Model", a.Spec.Model)
	l.add("Task ID", a.Spec.TaskID)
	l.add("Target Repo", a.Spec.TargetRepo)
	l.add("Branch", a.Spec.Branch)
	l.add("Parameters", keyValues(a.Spec.Parameters))
	l.add("Resume Session", a.Spec.ResumeSession)
	l.add("Job", a.Status.JobName)
	l.add("Session ID", a.Status.SessionID)
	l.add("Started", timeText(a.Status.StartedAt, now))
	l.add("Completed", timeText(a.Status.CompletedAt, now))
	l.add("Exit Code", int32Text(a.Status.ExitCode))
	l.add("Failure Reason", a.Status.FailureReason)
	l.add("PR URL", a.Status.PRURL)
	if a.Status.BatchID != "" {
		batch := a.Status.BatchID + " (" + string(a.Status.BatchProvider) + ")"
		if a.Status.BatchFallback {
			batch += ", fell back to a Job"
		}
		l.add("Batch", batch)
	}
	if n := len(a.Status.Output); n > 0 {
		l.add("Output", fmt.Sprintf("%d bytes (agentctl logs %s prints it)", n, a.Name))
	}
	return l, nil
}

func describeAgentRuntime(o client.Object, now time.Time) ([]field, []section) {
	r := o.(*omniav1alpha1.AgentRuntime)
	var l fieldList
	l.add("Mode", string(r.Spec.Mode))
	l.add("Prompt Pack", packRef(r.Spec.PromptPackRef))
	l.add("Providers", providers(r.Spec.Providers))
	if ref := r.Spec.ToolRegistryRef; ref != nil {
		l.add("Tool Registry", ref.Name)
	}
	l.phase(string(r.Status.Phase))
	l.add("Active Version", deref(r.Status.ActiveVersion))
	if rs := r.Status.Replicas; rs != nil {
		l.add("Replicas", fmt.Sprintf("%d ready, %d desired, %d available", rs.Ready, rs.Desired, rs.Available))
	}
	l.add("Service Endpoint", r.Status.ServiceEndpoint)
	l.add("Active Sessions", int32Text(r.Status.ActiveSessions))
	l.add("Last Activity", timeText(r.Status.LastActivityTime, now))
	if ro := r.Status.Rollout; ro != nil && ro.Active {
		l.add("Rollout", fmt.Sprintf("stable %s, candidate %s at %s%%", ro.StableVersion, ro.CandidateVersion, int32Text(ro.CurrentWeight)))
	}
	return l, nil
}

func describePromptPack(o client.Object, now time.Time) ([]field, []section) {
	p := o.(*omniav1alpha1.PromptPack)
	var l fieldList
	l.add("Pack", p.Spec.PackName)
	l.add("Version", p.Spec.Version)
	src := string(p.Spec.Source.Type)
	if ref := p.Spec.Source.ConfigMapRef; ref != nil {
		src += " " + ref.Name
	}
	l.add("Source", src)
	var skills []string
	for _, s := range p.Spec.Skills {
		skills = append(skills, s.Source)
	}
	l.add("Skill Sources", strings.Join(skills, ", "))
	l.phase(string(p.Status.Phase))
	l.add("Active Version", deref(p.Status.ActiveVersion))
	l.add("Channel", string(p.Status.Channel))
	l.add("Content Digest", p.Status.ContentDigest)
	l.add("Last Updated", timeText(p.Status.LastUpdated, now))
	return l, nil
}

func describeToolRegistry(o client.Object, now time.Time) ([]field, []section) {
	r := o.(*omniav1alpha1.ToolRegistry)
	var l fieldList
	var handlers []string
	for _, h := range r.Spec.Handlers {
		handlers = append(handlers, h.Name+" ("+string(h.Type)+")")
	}
	l.add("Handlers", strings.Join(handlers, ", "))
	probe := "off"
	if r.Spec.Probe != nil && r.Spec.Probe.Enabled {
		probe = "on"
	}
	l.add("Probe", probe)
	l.phase(string(r.Status.Phase))
	l.add("Tool Count", strconv.Itoa(toolCount(r)))
	l.add("Last Discovery", timeText(r.Status.LastDiscoveryTime, now))
	tools := section{title: "Tools", header: []string{"NAME", "HANDLER", "STATUS", "ENDPOINT", "ERROR"}}
	for _, t := range r.Status.DiscoveredTools {
		tools.rows = append(tools.rows, []string{t.Name, t.HandlerName, string(t.Status), t.Endpoint, deref(t.Error)})
	}
	return l, []section{tools}
}

// keyValues renders a map as k=v pairs sorted by key.
func keyValues(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ", ")
}
