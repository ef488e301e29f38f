package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
)

// TestSecretsNeverLeak passes secrets through an http sink's
// headers_secret (a dashed name, as Secret keys often are), the
// conversation header and an MCP server's header env, makes the sinks fail
// and retry, and has the CLI print its whole environment. The sink must
// still authenticate, and no secret value may appear in any event, log
// line, error or the CLI's environment.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const sinkSecret, convSecret, mcpSecret = "SECRET-sink-7f3a", "SECRET-conv-91cd", "SECRET-mcp-55aa"
	var mu sync.Mutex
	var auths []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auths = append(auths, r.Header.Get("Authorization"))
		calls++
		if calls%3 == 1 {
			w.WriteHeader(http.StatusInternalServerError) // retried
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // logged, not retried
	}))
	defer deny.Close()

	script := `env; echo '` + resultLine + `'`
	spec := execSpec(script, "x")
	spec.MCPServers = []runspec.MCPServer{{Name: "lore", Transport: "http", URL: "http://127.0.0.1:1/mcp", HeaderEnv: "LORE_MCP_AUTH"}}
	p := newPod(t, spec).withNATS()
	sinkFile := filepath.Join(t.TempDir(), "events.jsonl")
	p.env[sinks.EnvSinks] = `[{"type":"http","url":"` + srv.URL + `","headers_secret":"agent-events-auth"},` +
		`{"type":"http","url":"` + deny.URL + `","headers_secret":"agent-events-auth"},{"type":"file","path":"` + sinkFile + `"}]`
	p.env["agent-events-auth"] = "Authorization: Bearer " + sinkSecret
	p.env[runspec.EnvConversationAuth] = "conv-auth"
	p.env["conv-auth"] = "X-Conv: " + convSecret
	p.env["LORE_MCP_AUTH"] = "Bearer " + mcpSecret
	p.env[sinks.EnvRetryBaseMS] = "10"
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	mu.Lock()
	if len(auths) == 0 || auths[len(auths)-1] != "Bearer "+sinkSecret {
		t.Fatalf("sink did not authenticate: %q", auths)
	}
	mu.Unlock()

	var all bytes.Buffer
	all.Write(r.stdout)
	all.Write(r.stderr)
	file, err := os.ReadFile(sinkFile)
	if err != nil {
		t.Fatal(err)
	}
	all.Write(file)
	for _, ev := range p.natsEvents() {
		b, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.Write(ev.GetRaw())
	}
	for _, s := range []string{sinkSecret, convSecret} {
		if bytes.Contains(all.Bytes(), []byte(s)) {
			t.Errorf("secret %s leaked into events, logs or the CLI's environment", s)
		}
	}
	// The MCP header is the CLI's own credential: it must reach the CLI's
	// environment (the CLI expands ${LORE_MCP_AUTH}); here the CLI itself
	// prints it, but the supervisor's own logs must not.
	if !bytes.Contains(r.stdout, []byte("LORE_MCP_AUTH=Bearer "+mcpSecret)) {
		t.Error("the MCP header env did not reach the CLI")
	}
	if bytes.Contains(r.stderr, []byte(mcpSecret)) {
		t.Error("MCP secret in the supervisor's logs")
	}
	if !bytes.Contains(r.stderr, []byte("sink delivery failed")) {
		t.Error("the refusing sink was not logged; the test did not exercise the error path")
	}
}
