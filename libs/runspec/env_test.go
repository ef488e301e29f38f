package runspec

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
)

// lookup is what the supervisor's getenv sees in a pod whose environment is
// vars; a name written twice would be the last one, as in Kubernetes.
func lookup(vars []Var) func(string) string {
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return func(k string) string { return m[k] }
}

func TestEnvRoundTrip(t *testing.T) {
	job := Env{
		RunSpec: `{"model":"claude-opus-5-5","prompt":"fix {issue}"}`, Namespace: "team-a", Agent: "fix-42", UID: "uid-1",
		Station: "bug-fixer", TaskID: "T-1", Model: "claude-opus-5-5", Execution: ExecutionJob, Workspace: WorkspaceDir, Home: AgentDir,
		Deadline: 30*time.Minute - DeadlineMargin, ExitGrace: DefaultExitGrace, NATSURL: "nats://nats:4222",
		SinksJSON: `[{"type":"stdout"}]`, SelectJSON: `[{"type":"result"}]`, ReposJSON: `[{"name":"r","url":"o/r"}]`,
		WatchJSON: `["report.md"]`, ParametersJSON: `{"issue":"42"}`, TargetRepo: "o/r", Branch: "fix-42",
	}
	realtimeRun := job
	realtimeRun.Execution = ExecutionRealtime
	realtimeRun.ConversationSource, realtimeRun.ConversationID, realtimeRun.ConversationAuth = "https://store", "sess-9", "STORE_AUTH"
	realtimeRun.SkillsSource, realtimeRun.SkillsJSON = "https://skills", `["review"]`
	realtimeRun.ExitGrace = 2500 * time.Millisecond
	pinned := job
	pinned.ConversationPin = "conv-1"
	cases := []struct {
		rule string
		in   Env
		// want is what the supervisor reads; nil means exactly in.
		want *Env
	}{
		{"a job run reads back as written", job, nil},
		{"a realtime run with a conversation, skills and its own grace reads back as written", realtimeRun, nil},
		{"a pinned conversation reads back as written", pinned, nil},
		{"what the controller leaves out reads back as the supervisor's defaults",
			Env{RunSpec: `{"command":["true"]}`, Namespace: "ns", Agent: "a", UID: "u"},
			&Env{RunSpec: `{"command":["true"]}`, Namespace: "ns", Agent: "a", UID: "u",
				Execution: ExecutionJob, Workspace: WorkspaceDir, Home: AgentDir, ExitGrace: DefaultExitGrace}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			want := c.in
			if c.want != nil {
				want = *c.want
			}
			if got := Read(lookup(c.in.Vars())); !reflect.DeepEqual(got, want) {
				t.Fatalf("the supervisor read\n%+v\nthe controller meant\n%+v", got, want)
			}
		})
	}
}

// TestEveryFieldSurvivesTheRoundTrip gives every field of Env its own value:
// a field the controller does not write, one the supervisor does not read,
// or a name written by one side under another name than the other reads
// comes back different.
func TestEveryFieldSurvivesTheRoundTrip(t *testing.T) {
	var in Env
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString("value-of-" + v.Type().Field(i).Name)
		case time.Duration:
			f.SetInt(int64(time.Duration(i+1) * time.Second))
		default:
			t.Fatalf("field %s has a type this test does not fill; extend it", v.Type().Field(i).Name)
		}
	}
	// Pod comes from the downward API, as Kubernetes fills POD_NAME, and
	// the NATS credential from the run's Secret (secretKeyRef).
	written := lookup(in.Vars())
	getenv := func(k string) string {
		switch k {
		case EnvPodName:
			return in.Pod
		case EnvNATSCreds:
			return in.NATSCreds
		}
		return written(k)
	}
	if got := Read(getenv); !reflect.DeepEqual(got, in) {
		t.Fatalf("the supervisor read\n%+v\nthe controller wrote\n%+v", got, in)
	}
}

func TestVarsRules(t *testing.T) {
	full := Env{RunSpec: "{}", Home: AgentDir, Workspace: WorkspaceDir, Deadline: time.Minute, ExitGrace: time.Second, NATSURL: "nats://x",
		SelectJSON: "[]", WatchJSON: "[]", ParametersJSON: "{}", TargetRepo: "o/r", Branch: "b", Execution: ExecutionJob}
	vars := full.Vars()
	names := make([]string, 0, len(vars))
	for _, v := range vars {
		names = append(names, v.Name)
	}
	reserved := Reserved()
	cases := []struct {
		rule string
		ok   func() bool
	}{
		{"no name is written twice", func() bool { s := slices.Clone(names); slices.Sort(s); return len(slices.Compact(s)) == len(names) }},
		{"every name the controller writes is reserved, except the exit grace a recipe may tune", func() bool {
			for _, n := range names {
				if !slices.Contains(reserved, n) && n != EnvExitGraceMS {
					return false
				}
			}
			return !slices.Contains(reserved, EnvExitGraceMS)
		}},
		{"the downward API names are reserved but not written", func() bool {
			return slices.Contains(reserved, EnvPodName) && slices.Contains(reserved, EnvPodNamespace) &&
				!slices.Contains(names, EnvPodName) && !slices.Contains(names, EnvPodNamespace)
		}},
		{"the realtime session's token and address are reserved, so a recipe cannot swap the run's token", func() bool {
			return slices.Contains(reserved, realtime.EnvToken) && slices.Contains(reserved, realtime.EnvAddr) &&
				!slices.Contains(reserved, realtime.EnvIdleSeconds)
		}},
		{"the run's NATS credential is reserved and never written as a value: it comes from the run's Secret", func() bool {
			withCreds := full
			withCreds.NATSCreds = "creds"
			return slices.Contains(reserved, EnvNATSCreds) && !slices.ContainsFunc(withCreds.Vars(), func(v Var) bool { return v.Name == EnvNATSCreds || v.Value == "creds" })
		}},
		{"the deadline is written in milliseconds", func() bool { return lookup(vars)(EnvDeadlineMS) == "60000" }},
		{"PATH starts with the bundle under HOME", func() bool {
			return lookup(vars)(EnvPath) == "/agent/bin:/agent/.local/bin:/usr/local/bin:/usr/bin:/bin"
		}},
		{"the same values give the same list", func() bool { return reflect.DeepEqual(vars, full.Vars()) }},
		{"the agent container runs the bundle init copies", func() bool { return SupervisorBinary == "/agent/bin/supervisor" }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.ok() {
				t.Fatalf("broken; vars %v", vars)
			}
		})
	}
}

func TestReadFallbacks(t *testing.T) {
	cases := []struct {
		rule string
		env  map[string]string
		ok   func(Env) bool
	}{
		{"the namespace falls back to the pod's", map[string]string{EnvPodNamespace: "ns"}, func(e Env) bool { return e.Namespace == "ns" }},
		{"the uid falls back to the pod name", map[string]string{EnvPodName: "pod-1"}, func(e Env) bool { return e.UID == "pod-1" }},
		{"NATS_URL wins over the controller's AGENT_NATS_URL", map[string]string{EnvNATSURL: "nats://a", EnvNATSURLOverride: "nats://b"}, func(e Env) bool { return e.NATSURL == "nats://b" }},
		{"no deadline when unset", nil, func(e Env) bool { return e.Deadline == 0 }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if e := Read(func(k string) string { return c.env[k] }); !c.ok(e) {
				t.Fatalf("got %+v", e)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{"unset takes the default", "", time.Second},
		{"garbage takes the default", "soon", time.Second},
		{"zero takes the default", "0", time.Second},
		{"negative takes the default", "-5", time.Second},
		{"a count is milliseconds", "1500", 1500 * time.Millisecond},
		{"huge values are capped instead of overflowing", "99999999999999999", 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Millis(tt.in, time.Second); got != tt.want {
				t.Fatalf("Millis(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
