package runspec

import (
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/sinks"
)

// The run pod's environment: every variable the agent-controller writes into
// a run's Job and the supervisor reads back. Both sides go through Env.Vars
// and Read, so a name is typed here and nowhere else. (AGENT_SINKS and
// AGENT_SELECT are named by libs/sinks, which parses them; the realtime
// session's variables by libs/realtime.)
const (
	// EnvRepos is the JSON list of repositories the init step clones.
	EnvRepos = "AGENT_REPOS"
	// EnvSkills is the JSON list of skill names the init step stages.
	EnvSkills = "AGENT_SKILLS"
	// EnvSkillsSource is where the skills are fetched from.
	EnvSkillsSource = "AGENT_SKILLS_SOURCE"
	// EnvConversationSource is the conversation store's base URL.
	EnvConversationSource = "AGENT_CONVERSATION_SOURCE"
	// EnvConversationID is the conversation to restore and continue.
	EnvConversationID = "AGENT_CONVERSATION_ID"
	// EnvConversationPin is the id the run's conversation is saved under
	// when it ends (with EnvConversationID set too, the run forks that
	// conversation into this id).
	EnvConversationPin = "AGENT_CONVERSATION_PIN"
	// EnvConversationAuth names the variable holding the store's header
	// line, never the value, so the value stays out of the Job spec.
	EnvConversationAuth = "AGENT_CONVERSATION_AUTH"
	// EnvDeadlineMS is the run's deadline in milliseconds from the
	// supervisor's start (see DeadlineMargin).
	EnvDeadlineMS = "AGENT_DEADLINE_MS"
	// EnvExitGraceMS is how long, in milliseconds, the CLI gets between
	// SIGTERM and SIGKILL; DefaultExitGrace when unset.
	EnvExitGraceMS = "AGENT_EXIT_GRACE_MS"
	// EnvWatch is the JSON of output.watch: workspace files raised as events.
	EnvWatch = "AGENT_WATCH"
	// EnvWorkspaceDir is the workspace volume's mount point.
	EnvWorkspaceDir = "WORKSPACE_DIR"
	// EnvParameters is the Agent's parameters as a JSON object, for the CLI
	// and the scripts it runs.
	EnvParameters = "AGENT_PARAMETERS"
	// EnvTargetRepo is the Agent's spec.targetRepo, for the CLI.
	EnvTargetRepo = "TARGET_REPO"
	// EnvBranchName is the Agent's spec.branch, for the CLI.
	EnvBranchName = "BRANCH_NAME"
	// EnvModel is the run's effective model.
	EnvModel = "AGENT_MODEL"
	// EnvAgentName is the Agent's name.
	EnvAgentName = "AGENT_NAME"
	// EnvAgentNamespace is the Agent's namespace.
	EnvAgentNamespace = "AGENT_NAMESPACE"
	// EnvAgentUID is the Agent's uid; event dedupe ids are "<uid>-<seq>".
	EnvAgentUID = "AGENT_UID"
	// EnvStationName is the Station the run belongs to.
	EnvStationName = "STATION_NAME"
	// EnvTaskID is the Agent's spec.taskId.
	EnvTaskID = "TASK_ID"
	// EnvExecution is job or realtime.
	EnvExecution = "AGENT_EXECUTION"
	// EnvNATSURL is the NATS server the run publishes its events to; the
	// run publishes nowhere when it is unset.
	EnvNATSURL = "AGENT_NATS_URL"
	// EnvNATSCreds is the run's own NATS credential: the content of a
	// creds file (user JWT and seed), the NATSCredsKey entry of the run's
	// Secret passed through secretKeyRef, so it lives in the supervisor's
	// environment (which the CLI cannot read, docs/security.md) and never
	// in a file. It may publish only the run's events and its namespace's
	// sink subjects.
	EnvNATSCreds = "AGENT_NATS_CREDS"
	// EnvNATSCAFile holds the CA certificates that verify the NATS
	// server (public, mounted at NATSMountDir); when set the run connects
	// over TLS.
	EnvNATSCAFile = "AGENT_NATS_CA_FILE"
	// EnvNATSURLOverride, when set, wins over EnvNATSURL; the controller
	// never writes it, so a test or a hand-started run can redirect events.
	EnvNATSURLOverride = "NATS_URL"
	// EnvPodName and EnvPodNamespace come from the downward API. The
	// supervisor falls back to them when the run identity is missing.
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
	// EnvHome is the agent's HOME: the agent volume.
	EnvHome = "HOME"
	// EnvPath is the agent's PATH (see SearchPath).
	EnvPath = "PATH"
	// EnvGitHubToken is the first repository token, for the gh CLI; the
	// supervisor does not read it.
	EnvGitHubToken = "GH_TOKEN"
)

// Values both sides must agree on without passing them.
const (
	// AgentDir is the agent volume's mount point: the supervisor bundle,
	// the init step's state and the agent's HOME.
	AgentDir = "/agent"
	// WorkspaceDir is the workspace volume's mount point, where
	// repositories are cloned and the agent works.
	WorkspaceDir = "/workspace"
	// BundlePath is where, under AgentDir, `supervisor init` copies the
	// supervisor for the agent container to run.
	BundlePath = "bin/supervisor"
	// SupervisorBinary is the agent container's command.
	SupervisorBinary = AgentDir + "/" + BundlePath
	// CommandInit and CommandRun are the supervisor's subcommands for the
	// init container and the agent container.
	CommandInit = "init"
	CommandRun  = "run"
	// ExecutionJob and ExecutionRealtime are the values of EnvExecution
	// (the AgentDefinition's execution of the same names); job when unset.
	ExecutionJob      = "job"
	ExecutionRealtime = "realtime"
	// DefaultExitGrace is the SIGTERM → SIGKILL grace when EnvExitGraceMS
	// is unset.
	DefaultExitGrace = 10 * time.Second
	// DeadlineMargin is how much earlier than the Job's
	// activeDeadlineSeconds the supervisor's deadline falls, so it stops
	// the CLI and reports the timeout (exit 124) before the Job controller
	// kills the pod.
	DeadlineMargin = 10 * time.Second
)

// SearchPath is the agent's PATH: the supervisor bundle and the user's
// installs under home first, then the image's system directories.
func SearchPath(home string) string {
	return home + "/bin:" + home + "/.local/bin:/usr/local/bin:/usr/bin:/bin"
}

// Env is the run pod's environment as values: the controller fills one and
// writes Vars into the Job; the supervisor gets it back from Read.
type Env struct {
	// RunSpec is the encoded Spec (EnvName).
	RunSpec string
	// Namespace, Agent, UID, Station and TaskID identify the run on every
	// event.
	Namespace, Agent, UID, Station, TaskID string
	// Model is the run's effective model.
	Model string
	// Execution is ExecutionJob or ExecutionRealtime.
	Execution string
	// Workspace is the workspace directory, Home the agent's HOME.
	Workspace, Home string
	// Deadline is counted from the supervisor's start; 0 is none.
	Deadline time.Duration
	// ExitGrace is the SIGTERM → SIGKILL grace.
	ExitGrace time.Duration
	// NATSURL is where events are published; empty disables publishing.
	NATSURL string
	// NATSCreds is the run's NATS credential (a creds file's content) and
	// NATSCAFile the CA that verifies the server; empty for a server
	// without either. Vars never writes NATSCreds: the controller passes
	// it from the run's Secret (EnvNATSCreds).
	NATSCreds, NATSCAFile string
	// SinksJSON and SelectJSON are output.sinks and output.select.
	SinksJSON, SelectJSON string
	// ConversationSource, ConversationID, ConversationPin and
	// ConversationAuth configure the conversation store.
	ConversationSource, ConversationID, ConversationPin, ConversationAuth string
	// SkillsSource and SkillsJSON configure skills.
	SkillsSource, SkillsJSON string
	// ReposJSON lists the repositories; WatchJSON is output.watch.
	ReposJSON, WatchJSON string
	// ParametersJSON, TargetRepo and Branch are passed on to the CLI.
	ParametersJSON, TargetRepo, Branch string
	// Pod is the run pod's name (POD_NAME, from the downward API). Read
	// only: Vars never writes it.
	Pod string
}

// Var is one environment variable.
type Var struct {
	Name, Value string
}

// Vars is the environment the controller writes for e, in a fixed order
// (so the same run gives the same pod template). A variable the
// supervisor reads with a default is left out when its field is zero.
// POD_NAME and POD_NAMESPACE are not here: they come from the downward
// API; nor is EnvNATSCreds: it comes from the run's Secret.
func (e Env) Vars() []Var {
	var vs []Var
	add := func(name, value string) { vs = append(vs, Var{name, value}) }
	opt := func(name, value string) {
		if value != "" {
			add(name, value)
		}
	}
	add(sinks.EnvSinks, e.SinksJSON)
	add(EnvRepos, e.ReposJSON)
	add(EnvSkills, e.SkillsJSON)
	add(EnvSkillsSource, e.SkillsSource)
	add(EnvConversationAuth, e.ConversationAuth)
	add(EnvConversationSource, e.ConversationSource)
	add(EnvConversationID, e.ConversationID)
	add(EnvConversationPin, e.ConversationPin)
	opt(EnvDeadlineMS, millisText(e.Deadline))
	opt(EnvExitGraceMS, millisText(e.ExitGrace))
	opt(sinks.EnvSelect, e.SelectJSON)
	opt(EnvWatch, e.WatchJSON)
	opt(EnvWorkspaceDir, e.Workspace)
	opt(EnvParameters, e.ParametersJSON)
	opt(EnvTargetRepo, e.TargetRepo)
	opt(EnvBranchName, e.Branch)
	add(EnvModel, e.Model)
	add(EnvAgentName, e.Agent)
	add(EnvAgentNamespace, e.Namespace)
	add(EnvAgentUID, e.UID)
	add(EnvStationName, e.Station)
	add(EnvTaskID, e.TaskID)
	opt(EnvExecution, e.Execution)
	add(EnvName, e.RunSpec)
	opt(EnvNATSURL, e.NATSURL)
	opt(EnvNATSCAFile, e.NATSCAFile)
	if e.Home != "" {
		add(EnvHome, e.Home)
		add(EnvPath, SearchPath(e.Home))
	}
	return vs
}

// Reserved lists every name the controller owns in a run's environment. A
// recipe's env or secrets entry with one of these names is dropped, so a
// recipe can never redirect a run's sinks, identity or workspace. The
// realtime session's token and listen address, and the run's NATS
// credential, are among them although Vars does not write them (the token
// and the credential come from the run's Secrets): a recipe that set them
// could hand the session a token of its choosing, move the session off the
// port the gateway calls, or publish as another user. EnvExitGraceMS and
// realtime.EnvIdleSeconds are not: the controller leaves them unset, and a
// recipe whose CLI needs longer to shut down, or whose sessions wait longer
// between prompts, may set them.
func Reserved() []string {
	return []string{
		sinks.EnvSinks, sinks.EnvSelect, EnvRepos, EnvSkills, EnvSkillsSource,
		EnvConversationSource, EnvConversationID, EnvConversationPin, EnvConversationAuth,
		EnvDeadlineMS, EnvWatch, EnvWorkspaceDir, EnvParameters, EnvTargetRepo, EnvBranchName,
		EnvModel, EnvAgentName, EnvAgentNamespace, EnvAgentUID, EnvStationName, EnvTaskID, EnvExecution,
		EnvName, EnvNATSURL, EnvNATSCreds, EnvNATSCAFile, EnvNATSURLOverride, EnvPodName, EnvPodNamespace, EnvHome, EnvPath,
		realtime.EnvToken, realtime.EnvAddr,
	}
}

// Read is the supervisor's side of Vars: it reads the environment through
// getenv and applies the defaults of what the controller may leave out.
func Read(getenv func(string) string) Env {
	e := Env{
		RunSpec:            getenv(EnvName),
		Namespace:          first(getenv(EnvAgentNamespace), getenv(EnvPodNamespace)),
		Agent:              getenv(EnvAgentName),
		UID:                getenv(EnvAgentUID),
		Station:            getenv(EnvStationName),
		TaskID:             getenv(EnvTaskID),
		Model:              getenv(EnvModel),
		Execution:          first(getenv(EnvExecution), ExecutionJob),
		Workspace:          first(getenv(EnvWorkspaceDir), WorkspaceDir),
		Home:               first(getenv(EnvHome), AgentDir),
		Deadline:           Millis(getenv(EnvDeadlineMS), 0),
		ExitGrace:          Millis(getenv(EnvExitGraceMS), DefaultExitGrace),
		NATSURL:            first(getenv(EnvNATSURLOverride), getenv(EnvNATSURL)),
		NATSCreds:          getenv(EnvNATSCreds),
		NATSCAFile:         getenv(EnvNATSCAFile),
		SinksJSON:          getenv(sinks.EnvSinks),
		SelectJSON:         getenv(sinks.EnvSelect),
		ConversationSource: getenv(EnvConversationSource),
		ConversationID:     getenv(EnvConversationID),
		ConversationPin:    getenv(EnvConversationPin),
		ConversationAuth:   getenv(EnvConversationAuth),
		SkillsSource:       getenv(EnvSkillsSource),
		SkillsJSON:         getenv(EnvSkills),
		ReposJSON:          getenv(EnvRepos),
		WatchJSON:          getenv(EnvWatch),
		ParametersJSON:     getenv(EnvParameters),
		TargetRepo:         getenv(EnvTargetRepo),
		Branch:             getenv(EnvBranchName),
		Pod:                getenv(EnvPodName),
	}
	if e.UID == "" {
		// Dedupe ids are "<uid>-<seq>"; without a uid (a run started by
		// hand) the pod name still keeps two runs apart.
		e.UID = getenv(EnvPodName)
	}
	return e
}

// Millis parses a positive count of milliseconds. Unset, zero, negative or
// malformed gives def: a typo must not mean "no grace". Huge values are
// capped at a year rather than overflowing.
func Millis(s string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	const limit = int64(365 * 24 * time.Hour / time.Millisecond)
	return time.Duration(min(n, limit)) * time.Millisecond
}

// millisText is the inverse of Millis for a positive d, "" otherwise.
func millisText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// The run's NATS Secret (see NATSSecretName) and its keys. Only its
// public CA is mounted, at NATSMountDir; the credential reaches the
// supervisor as EnvNATSCreds.
const (
	NATSMountDir  = "/var/run/agentplane/nats"
	NATSCredsKey  = "run.creds"
	NATSCAKey     = "ca.crt"
	natsSecretPfx = "agentplane-nats-"
)

// NATSSecretName is the name of the Secret holding a run's NATS
// credential, derived from the Agent's uid so a re-created Agent of the
// same name never meets its predecessor's.
func NATSSecretName(uid string) string { return natsSecretPfx + uid }
