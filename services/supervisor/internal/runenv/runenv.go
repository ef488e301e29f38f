// Package runenv reads the run pod's environment, which the agent-controller
// writes into the Job (services/agent-controller/internal/jobbuild), into
// one typed value shared by `supervisor init` and `supervisor run`.
package runenv

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Defaults for values the environment may leave out.
const (
	DefaultWorkspace = "/workspace"
	DefaultAgentDir  = "/agent"
	// DefaultExitGrace is how long the CLI gets between SIGTERM and SIGKILL.
	DefaultExitGrace = 10 * time.Second
)

// Env is what the supervisor reads from its environment.
type Env struct {
	// Getenv resolves any variable, including secret-named ones that may
	// contain dashes (never go through a shell for those).
	Getenv func(string) string

	Namespace, Agent, UID, Station, TaskID string
	// Model is AGENT_MODEL, the run's effective model.
	Model string
	// Execution is AGENT_EXECUTION: job (default) or realtime.
	Execution string
	// Workspace is WORKSPACE_DIR, Home is HOME.
	Workspace, Home string
	// Deadline is AGENT_DEADLINE_MS from the supervisor's start; 0 is none.
	Deadline time.Duration
	// ExitGrace is AGENT_EXIT_GRACE_MS.
	ExitGrace time.Duration
	// NATSURL is NATS_URL or AGENT_NATS_URL; empty disables publishing.
	NATSURL string
	// Conversation fields (AGENT_CONVERSATION_*). Auth names the env var
	// holding a whole header line, never the value.
	ConversationSource, ConversationID, ConversationPin, ConversationAuth string
	// SkillsSource and Skills are AGENT_SKILLS_SOURCE and AGENT_SKILLS.
	SkillsSource string
	SkillsJSON   string
	// ReposJSON is AGENT_REPOS; WatchJSON is AGENT_WATCH.
	ReposJSON, WatchJSON string
	// Realtime sessions (libs/realtime names the variables): the listen
	// address, the token file and the idle limit.
	RealtimeAddr, RealtimeTokenFile string
	RealtimeIdle                    time.Duration
}

// Read fills an Env from getenv (os.Getenv when nil).
func Read(getenv func(string) string) Env {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := Env{
		Getenv:             getenv,
		Namespace:          first(getenv("AGENT_NAMESPACE"), getenv("POD_NAMESPACE")),
		Agent:              getenv("AGENT_NAME"),
		UID:                getenv("AGENT_UID"),
		Station:            getenv("STATION_NAME"),
		TaskID:             getenv("TASK_ID"),
		Model:              getenv("AGENT_MODEL"),
		Execution:          first(getenv("AGENT_EXECUTION"), "job"),
		Workspace:          first(getenv("WORKSPACE_DIR"), DefaultWorkspace),
		Home:               first(getenv("HOME"), DefaultAgentDir),
		Deadline:           millis(getenv("AGENT_DEADLINE_MS"), 0),
		ExitGrace:          millis(getenv("AGENT_EXIT_GRACE_MS"), DefaultExitGrace),
		NATSURL:            first(getenv("NATS_URL"), getenv("AGENT_NATS_URL")),
		ConversationSource: getenv("AGENT_CONVERSATION_SOURCE"),
		ConversationID:     getenv("AGENT_CONVERSATION_ID"),
		ConversationPin:    getenv("AGENT_CONVERSATION_PIN"),
		ConversationAuth:   getenv("AGENT_CONVERSATION_AUTH"),
		SkillsSource:       getenv("AGENT_SKILLS_SOURCE"),
		SkillsJSON:         getenv("AGENT_SKILLS"),
		ReposJSON:          getenv("AGENT_REPOS"),
		WatchJSON:          getenv("AGENT_WATCH"),
		RealtimeAddr:       first(getenv(realtime.EnvAddr), realtime.DefaultAddr),
		RealtimeTokenFile:  first(getenv(realtime.EnvTokenFile), realtime.TokenFile),
		RealtimeIdle:       seconds(getenv(realtime.EnvIdleSeconds), realtime.DefaultIdle),
	}
	if e.UID == "" {
		// Dedupe ids are "<uid>-<seq>"; without a uid (a run started by
		// hand) the pod name still keeps two runs apart.
		e.UID = getenv("POD_NAME")
	}
	return e
}

// Identity is the run identity stamped on every event.
func (e Env) Identity() *eventsv1.RunIdentity {
	return &eventsv1.RunIdentity{Namespace: e.Namespace, Agent: e.Agent, Uid: e.UID, Station: e.Station, TaskId: e.TaskID}
}

// millis parses a positive millisecond count; unset, zero, negative or
// garbage gives def, as in the reference (a typo must not mean "no grace").
func millis(s string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	const limit = int64(365 * 24 * time.Hour / time.Millisecond)
	return time.Duration(min(n, limit)) * time.Millisecond
}

// seconds parses a positive whole number of seconds like millis does.
func seconds(s string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	const limit = int64(365 * 24 * time.Hour / time.Second)
	return time.Duration(min(n, limit)) * time.Second
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
