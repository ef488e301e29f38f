// Package cli turns the run spec the controller froze (AGENT_RUN_SPEC) and
// the pod's environment into the vendor CLI to start: its vendor, its
// invocation and its argv, through libs/vendors.
package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/prompt"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// SettingsFile is where the init step stages claude's settings, relative
// to HOME; the CLI is pointed at it only when it exists.
const SettingsFile = ".claude/settings.json"

// ConversationSkippedFile is the marker, under the agent dir, that
// `supervisor init` leaves when the conversation the run continues could
// not be restored from its store. Its content is the reason, for people.
const ConversationSkippedFile = ".agentplane/conversation-skipped"

// Plan is what to run.
type Plan struct {
	Spec       *runspec.Spec
	Vendor     vendors.Vendor
	Invocation vendors.Invocation
}

// Load decodes AGENT_RUN_SPEC and resolves the vendor and invocation. It
// refuses a prompt that renders over prompt.MaxRenderedBytes and a
// conversation id, pin or resumed session that is not a plain session id
// (agentsv1alpha1.SessionIDPattern): those ids become paths of the
// conversation store and arguments of the CLI, and admission checks them
// only on objects created since it does.
func Load(env runenv.Env) (*Plan, error) {
	spec, err := runspec.Decode(env.RunSpec)
	if err != nil {
		return nil, err
	}
	if err := checkSessionIDs(spec, env); err != nil {
		return nil, err
	}
	rendered := ""
	if spec.ResumeSession == "" {
		// A resumed session sends no initial prompt, so it is not rendered.
		if rendered, err = prompt.Render(spec.Prompt, spec.Parameters); err != nil {
			return nil, fmt.Errorf("render the prompt: %w", err)
		}
	}
	v := vendors.Route(spec.Model)
	if spec.Model == "" && len(spec.Command) > 0 {
		v, _ = vendors.ByName(vendors.NameExec)
	}
	inv := vendors.Invocation{
		Model:           spec.Model,
		Prompt:          rendered,
		AllowedTools:    spec.AllowedTools,
		DisallowedTools: spec.DisallowedTools,
		PermissionMode:  agentsv1alpha1.PermissionMode(spec.PermissionMode),
		MaxTurns:        spec.MaxTurns,
		ResumeID:        env.ConversationID,
		PinID:           env.ConversationPin,
	}
	if v.Name() == vendors.NameExec {
		inv.Model, inv.ExecCommand = "", spec.Command
	}
	if spec.ResumeSession != "" {
		// A resumed realtime session continues that session and sends no
		// initial prompt.
		inv.ResumeID = spec.ResumeSession
	}
	for _, m := range spec.MCPServers {
		// HeaderEnv is already the sanitised name MCPHeaderEnvName would
		// derive (and that function is idempotent), so passing it as the
		// secret name makes the vendor config name exactly this variable.
		inv.MCPServers = append(inv.MCPServers, agentsv1alpha1.MCPServer{
			Name: m.Name, Transport: agentsv1alpha1.MCPTransport(m.Transport),
			Command: m.Command, Args: m.Args, URL: m.URL, HeadersSecret: m.HeaderEnv,
		})
	}
	if v.Name() == vendors.NameClaude {
		if p := filepath.Join(env.Home, SettingsFile); fileExists(p) {
			inv.SettingsPath = p
		}
	}
	return &Plan{Spec: spec, Vendor: v, Invocation: inv}, nil
}

// checkSessionIDs refuses every id of the run that would become a store
// path or a CLI argument and is not a plain session id.
func checkSessionIDs(spec *runspec.Spec, env runenv.Env) error {
	for _, id := range []struct{ what, value string }{
		{"spec.resumeSession", spec.ResumeSession},
		{"the conversation id (resources.conversation.id or spec.resumeSession)", env.ConversationID},
		{"resources.conversation.pin", env.ConversationPin},
	} {
		if id.value == "" {
			continue
		}
		if err := agentsv1alpha1.CheckSessionID(id.what, id.value); err != nil {
			return err
		}
	}
	return nil
}

// StartFresh drops the session to resume when the init step left
// ConversationSkippedFile under agentDir: the CLI would refuse to resume a
// session it does not have ("no conversation found") and fail the run. A
// pin stays, so the fresh session is still saved under the pinned id, and a
// resumed realtime session keeps sending no initial prompt (it waits for
// the first one). It reports whether the marker was there.
func (p *Plan) StartFresh(agentDir string) bool {
	if !fileExists(filepath.Join(agentDir, ConversationSkippedFile)) {
		return false
	}
	p.Invocation.ResumeID = ""
	return true
}

// Argv returns the command line to start.
func (p *Plan) Argv() ([]string, error) {
	argv, err := p.Vendor.Argv(p.Invocation)
	if err != nil {
		return nil, fmt.Errorf("%s command line: %w", p.Vendor.Name(), err)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("empty command line")
	}
	return argv, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
