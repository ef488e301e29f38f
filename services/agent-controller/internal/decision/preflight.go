package decision

import (
	"errors"
	"fmt"
	"strings"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/prompt"
	"github.com/agentplane/agentplane/libs/vendors"
)

// Checks of what the Agent asks of its definition, made before any run
// starts, whatever its mode: the prompt its parameters render must fit
// prompt.MaxRenderedBytes, and a spec.model that moves the run to another
// vendor must not drop the definition's tool rules. Either failure fails
// the Agent at Pending with a reason naming what is at fault; neither
// costs the controller more than a scan of the template.

// preflight returns why a run that starts a vendor CLI (a Job run or a
// realtime session) cannot start, or "".
func preflight(s Snapshot) string {
	if reason := promptRefusal(s); reason != "" {
		return reason
	}
	return toolRuleRefusal(s)
}

// toolRules says which of a definition's tool rules a vendor's CLI
// enforces, as libs/vendors renders them: Claude Code takes both as flags,
// the Gemini CLI allowed tools as flags and denied ones in its settings,
// OpenCode only denied ones (in its config; `opencode run` asks nothing, so
// it has no allow list), and Codex and exec neither.
type toolRules struct {
	allowed, disallowed bool
}

// vendorToolRules is toolRules by vendor name; a vendor missing here
// enforces neither.
var vendorToolRules = map[string]toolRules{
	vendors.NameClaude:   {allowed: true, disallowed: true},
	vendors.NameGemini:   {allowed: true, disallowed: true},
	vendors.NameOpenCode: {disallowed: true},
}

// promptRefusal returns why the definition's prompt, rendered with the
// Agent's parameters, cannot be used, or "". It counts the size without
// building the prompt (prompt.Size), so an Agent made to exhaust the
// controller's memory costs it nothing. A resumed realtime session sends
// no initial prompt, so its prompt is not checked.
func promptRefusal(s Snapshot) string {
	a := s.Agent
	if a.Spec.ResumeSession != "" {
		return ""
	}
	_, err := prompt.Size(s.Definition.Spec.Prompt, a.Spec.Parameters)
	var tl *prompt.TooLargeError
	if errors.As(err, &tl) {
		return fmt.Sprintf("%v (spec.prompt of AgentDefinition %s with this Agent's spec.parameters; the cap is prompt.MaxRenderedBytes)",
			err, s.Definition.Name)
	}
	return ""
}

// toolRuleRefusal returns why the Agent's spec.model cannot run the
// definition, or "": a model routed to another vendor than the
// definition's, whose CLI cannot enforce a tool rule the definition's
// vendor does. Running it anyway would silently drop the rule: a denied
// tool becomes usable, or an allow list stops limiting the agent.
func toolRuleRefusal(s Snapshot) string {
	a, def := s.Agent, &s.Definition.Spec
	if a.Spec.Model == "" {
		return ""
	}
	defModel := def.Model
	if defModel == "" {
		defModel = agentsv1alpha1.DefaultModel
	}
	from, to := vendors.Route(defModel), vendors.Route(a.Spec.Model)
	if from.Name() == to.Name() {
		return ""
	}
	had, has := vendorToolRules[from.Name()], vendorToolRules[to.Name()]
	var lost []string
	if len(def.DisallowedTools) > 0 && had.disallowed && !has.disallowed {
		lost = append(lost, fmt.Sprintf("disallowed_tools (%d)", len(def.DisallowedTools)))
	}
	if len(def.AllowedTools) > 0 && def.EffectivePermissionMode() == agentsv1alpha1.PermissionAuto && had.allowed && !has.allowed {
		lost = append(lost, fmt.Sprintf("allowed_tools (%d, permission_mode auto)", len(def.AllowedTools)))
	}
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf("spec.model %q runs %s, which cannot enforce the %s of AgentDefinition %s (enforced by %s, the vendor of its model %q); the run would lose them: use a %s model or a definition written for %s",
		a.Spec.Model, to.Name(), strings.Join(lost, " and "), s.Definition.Name, from.Name(), defModel, from.Name(), to.Name())
}
