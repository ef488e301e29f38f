package runenv

import (
	"reflect"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
)

// TestReadsWhatTheControllerWrites feeds Read the environment the
// controller's side of libs/runspec writes, so the supervisor cannot drift
// from it by reading a variable of its own.
func TestReadsWhatTheControllerWrites(t *testing.T) {
	want := runspec.Env{
		RunSpec: `{"model":"m","prompt":"p"}`, Namespace: "team-a", Agent: "fix-42", UID: "uid-1", Station: "st", TaskID: "T-1",
		Model: "m", Execution: runspec.ExecutionRealtime, Workspace: "/workspace", Home: "/agent", Deadline: 50 * time.Second,
		ExitGrace: runspec.DefaultExitGrace, NATSURL: "nats://x", SinksJSON: "[]", ReposJSON: "[]", SkillsJSON: "[]",
		ConversationSource: "https://store", ConversationID: "sess-1", ConversationAuth: "STORE_AUTH",
	}
	m := map[string]string{}
	for _, v := range want.Vars() {
		m[v.Name] = v.Value
	}
	e := Read(func(k string) string { return m[k] })
	if !reflect.DeepEqual(e.Env, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", e.Env, want)
	}
	if !e.Realtime() {
		t.Error("AGENT_EXECUTION=realtime is a realtime run")
	}
}

func TestReadDefaultsAndFallbacks(t *testing.T) {
	env := map[string]string{runspec.EnvPodNamespace: "ns", runspec.EnvPodName: "pod-1", runspec.EnvNATSURL: "nats://x"}
	e := Read(func(k string) string { return env[k] })
	if e.Namespace != "ns" || e.UID != "pod-1" || e.NATSURL != "nats://x" {
		t.Fatalf("fallbacks not applied: %+v", e)
	}
	if e.Workspace != runspec.WorkspaceDir || e.Home != runspec.AgentDir || e.ExitGrace != runspec.DefaultExitGrace || e.Deadline != 0 || e.Execution != runspec.ExecutionJob || e.Realtime() {
		t.Fatalf("defaults not applied: %+v", e)
	}
}

// TestRealtimeSettings checks the realtime variables' defaults (the ones the
// controller relies on when it sets nothing) and overrides.
func TestRealtimeSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		addr, token string
		idle        time.Duration
	}{
		{"unset gives the well-known port, no token and the idle limit", nil,
			":8090", "", 15 * time.Minute},
		{"variables set each", map[string]string{"AGENT_REALTIME_ADDR": "127.0.0.1:0",
			"AGENT_REALTIME_TOKEN": "tok", "AGENT_REALTIME_IDLE_SECONDS": "7"},
			"127.0.0.1:0", "tok", 7 * time.Second},
		{"a non-positive idle limit takes the default", map[string]string{"AGENT_REALTIME_IDLE_SECONDS": "0"},
			":8090", "", 15 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Read(func(k string) string { return tt.env[k] })
			if e.RealtimeAddr != tt.addr || e.RealtimeToken != tt.token || e.RealtimeIdle != tt.idle {
				t.Fatalf("got addr %q, token %q, idle %v", e.RealtimeAddr, e.RealtimeToken, e.RealtimeIdle)
			}
		})
	}
}
