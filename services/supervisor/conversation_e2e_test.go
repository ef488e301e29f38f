package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
)

// convSecret is the store's header value; it must never reach a log, an
// event or the CLI.
const convSecret = "conv-token-9c1d"

// storedPost is one upload the conversation store received, with the
// supervisor's stdout as it stood when the upload arrived.
type storedPost struct {
	path, contentType, auth string
	body                    []byte
	stdoutThen              []byte
}

// convStore is a conversation store: it serves the archives in get on GET
// and records every POST, answering status (201 when zero). The supervisor
// runs as another process, so the race detector sees no order between the
// test's writes and the handler's reads: mu guards all of them.
type convStore struct {
	t      *testing.T
	srv    *httptest.Server
	status int

	mu  sync.Mutex
	get map[string][]byte
	// stdout, when set, is read when an upload arrives.
	stdout func() []byte
	posts  []storedPost
}

// serve makes GET path answer archive.
func (s *convStore) serve(path string, archive []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.get[path] = archive
}

// watchStdout makes each upload record what stdout returns at that moment.
func (s *convStore) watchStdout(stdout func() []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stdout = stdout
}

func newConvStore(t *testing.T, status int) *convStore {
	t.Helper()
	s := &convStore{t: t, status: status, get: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Conv") != convSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.Method {
		case http.MethodGet:
			s.mu.Lock()
			b, ok := s.get[r.URL.Path]
			s.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(b)
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			s.mu.Lock()
			var then []byte
			if s.stdout != nil {
				then = s.stdout()
			}
			s.posts = append(s.posts, storedPost{path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
				auth: r.Header.Get("X-Conv"), body: body, stdoutThen: then})
			s.mu.Unlock()
			if s.status != 0 {
				w.WriteHeader(s.status)
				return
			}
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *convStore) uploads() []storedPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// useStore points the pod's conversation at store, with userinfo in the
// source that must never reach the output, and the store's header line.
func (p *pod) useStore(base string) {
	p.env[runspec.EnvConversationSource] = strings.Replace(base, "http://", "http://u:url-secret@", 1) + "/conversations"
	p.env[runspec.EnvConversationAuth] = "conv-auth"
	p.env["conv-auth"] = "X-Conv: " + convSecret
}

// archiveFiles reads a tar.gz into its member names (in order) and the
// content of its regular files.
func archiveFiles(t *testing.T, b []byte) ([]string, map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the upload is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var names []string
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, files
		}
		if err != nil {
			t.Fatalf("the upload is not a tar: %v", err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			body, _ := io.ReadAll(tr)
			files[h.Name] = string(body)
		}
	}
}

// sessionFile is where the mock claude keeps session id's transcript for
// a CLI working in the pod's workspace.
func (p *pod) sessionFile(id string) string {
	project := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, p.workspace)
	return ".claude/projects/" + project + "/" + id + ".jsonl"
}

// checkNoSecrets fails when a credential of the store reached the output.
func checkNoSecrets(t *testing.T, r result) {
	t.Helper()
	for _, secret := range []string{convSecret, "url-secret"} {
		if bytes.Contains(r.stdout, []byte(secret)) || bytes.Contains(r.stderr, []byte(secret)) {
			t.Fatalf("credential %q in the supervisor's output", secret)
		}
	}
}

// TestRunSavesConversation: a Job run whose definition pins its
// conversation POSTs the vendor's state dir to <source>/<pin> after the
// CLI and the output.watch events and before the terminal event, whatever
// the run's outcome; a store that fails changes neither the exit code nor
// the terminal event and is only a warning; without a pin or a state dir
// nothing is sent.
func TestRunSavesConversation(t *testing.T) {
	const pin = "pin-1"
	tests := []struct {
		name   string
		spec   *runspec.Spec
		pin    string
		status int
		down   bool
		code   int
		// terminal is the terminal event's phase/status.
		terminal string
		// saved: an upload to /conversations/<pin> with the pinned session.
		saved bool
		// warn is a fragment of the warning the supervisor logs; empty for
		// none.
		warn string
	}{
		{name: "a run with source and pin posts the state dir to the pin", spec: jobSpec(vendorModels["claude"], "go"),
			pin: pin, code: 0, terminal: "agent/succeeded", saved: true},
		{name: "a failed run is saved too and still fails as before", spec: jobSpec(vendorModels["claude"], "mock:fail go"),
			pin: pin, code: 1, terminal: "agent/failed", saved: true},
		{name: "a store answering 503 leaves the run's success alone", spec: jobSpec(vendorModels["claude"], "go"),
			pin: pin, status: http.StatusServiceUnavailable, code: 0, terminal: "agent/succeeded", saved: true, warn: ": status 503"},
		{name: "an unreachable store leaves the run's success alone", spec: jobSpec(vendorModels["claude"], "go"),
			pin: pin, down: true, code: 0, terminal: "agent/succeeded", warn: "connection refused"},
		{name: "without a pin nothing is posted", spec: jobSpec(vendorModels["claude"], "go"),
			code: 0, terminal: "agent/succeeded"},
		{name: "a vendor without a state dir posts nothing",
			spec: execSpec(`mkdir -p "$HOME/.claude/projects/x" && echo '{}' > "$HOME/.claude/projects/x/s.jsonl" && echo '`+resultLine+`'`, "x"),
			pin:  pin, code: 0, terminal: "agent/succeeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newConvStore(t, tt.status)
			p := newPod(t, tt.spec).withNATS()
			p.useStore(store.srv.URL)
			p.env[runspec.EnvConversationPin] = tt.pin
			p.env[runspec.EnvWatch] = `[{"event":"report","path":"report.md"}]`
			mustWrite(t, filepath.Join(p.workspace, "report.md"), []byte("# done\n"))
			if tt.down {
				store.srv.Close()
			}
			c, stdout, errb := p.startToFile("run")
			store.watchStdout(stdout)
			_ = c.Wait()
			r := result{code: c.ProcessState.ExitCode(), stdout: stdout(), stderr: errb.Bytes()}
			if t.Failed() || testing.Verbose() {
				t.Logf("stderr:\n%s", lastBytes(r.stderr, 4000))
			}

			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			evs := p.natsEvents()
			if got := lifecycle(evs[len(evs)-1]); got != tt.terminal {
				t.Fatalf("terminal event %s, want %s", got, tt.terminal)
			}
			if lc := terminal(t, r.stdout); lc.GetExitCode() != int32(tt.code) {
				t.Fatalf("terminal event on stdout %v, want exit code %d", lc, tt.code)
			}
			checkNoSecrets(t, r)

			ups := store.uploads()
			if !tt.saved {
				if len(ups) != 0 {
					t.Fatalf("%d uploads, want none", len(ups))
				}
			} else {
				if len(ups) != 1 {
					t.Fatalf("%d uploads, want one", len(ups))
				}
				up := ups[0]
				if up.path != "/conversations/"+pin || up.contentType != "application/gzip" || up.auth != convSecret {
					t.Fatalf("upload to %s, type %q, auth %q", up.path, up.contentType, up.auth)
				}
				names, files := archiveFiles(t, up.body)
				session := p.sessionFile(pin)
				if !slices.IsSorted(names) || names[0] != ".claude/projects/" || !strings.Contains(files[session], `"content":"`+tt.spec.Prompt+`"`) {
					t.Fatalf("members %q: want the state dir, sorted, relative to HOME, with %s holding the prompt", names, session)
				}
				for _, n := range names {
					if !strings.HasPrefix(n, ".claude/projects/") {
						t.Fatalf("member %q is outside the state dir", n)
					}
				}
				// After the CLI and the watch file's event, before the
				// terminal event.
				_, own := stdoutEvents(t, up.stdoutThen)
				var seen []string
				for _, ev := range own {
					seen = append(seen, lifecycle(ev)+ev.GetFile().GetEvent())
				}
				if !slices.Equal(seen, []string{"agent/started", "report"}) || !bytes.Contains(up.stdoutThen, []byte(`"type":"result"`)) {
					t.Fatalf("stdout when the archive arrived held %q: want the CLI's lines and the file event, no terminal event", seen)
				}
			}
			if tt.warn != "" {
				m := logRecord(t, r.stderr, "conversation not saved")
				msg, _ := m["err"].(string)
				if m["level"] != "WARN" || !strings.Contains(msg, tt.warn) || !strings.Contains(msg, "/conversations/"+pin) {
					t.Fatalf("warning %v: want level WARN and an error naming the url and %q", m, tt.warn)
				}
			} else if bytes.Contains(r.stderr, []byte("conversation not saved")) {
				t.Fatalf("unexpected warning:\n%s", lastBytes(r.stderr, 2000))
			}
		})
	}
}

// TestRunForksRestoredConversationIntoPin: with id and pin, init restores
// id from the store, the CLI forks it into pin (--resume id --fork-session
// --session-id pin), and the run saves the state dir to <pin>: the restored
// session as it was, and the pinned one carrying its history on. The
// archive saved is one the init step restores.
func TestRunForksRestoredConversationIntoPin(t *testing.T) {
	t.Parallel()
	store := newConvStore(t, 0)
	p := newPod(t, jobSpec(vendorModels["claude"], "continue please")).withNATS()
	restored := p.sessionFile("sess-1")
	earlier := `{"type":"user","message":{"role":"user","content":"the first run's prompt"}}` + "\n"
	store.serve("/conversations/sess-1", tarGz(t, [2]string{restored, earlier}))
	p.useStore(store.srv.URL)
	p.env[runspec.EnvConversationID] = "sess-1"
	p.env[runspec.EnvConversationPin] = "pin-1"
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("init exit %d", r.code)
	}
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("run exit %d", r.code)
	}
	if id := resultSessionID(t, r.stdout); id != "pin-1" {
		t.Fatalf("the run's session is %q, want the pin", id)
	}
	ups := store.uploads()
	if len(ups) != 1 || ups[0].path != "/conversations/pin-1" {
		t.Fatalf("uploads %v, want one to /conversations/pin-1", ups)
	}
	_, files := archiveFiles(t, ups[0].body)
	pinned := files[p.sessionFile("pin-1")]
	if files[restored] != earlier || !strings.HasPrefix(pinned, earlier) || !strings.Contains(pinned, "continue please") {
		t.Fatalf("archive files %q: want %s unchanged and the pinned session carrying it on", files, restored)
	}

	// A later run continuing the pin restores exactly what was saved.
	next := newPod(t, jobSpec(vendorModels["claude"], "and again"))
	store.serve("/conversations/pin-1", ups[0].body)
	next.useStore(store.srv.URL)
	next.env[runspec.EnvConversationID] = "pin-1"
	if r := next.run("init"); r.code != 0 || bytes.Contains(r.stdout, []byte(`"status":"skipped"`)) {
		t.Fatalf("init of the next run: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(next.agentDir, filepath.FromSlash(p.sessionFile("pin-1")))); string(got) != pinned {
		t.Fatalf("the next run restored %q, want the saved pinned session %q", got, pinned)
	}
	rn := next.run("run")
	if rn.code != 0 || resultSessionID(t, rn.stdout) != "pin-1" {
		t.Fatalf("the next run: exit %d, session %q, want pin-1 resumed", rn.code, resultSessionID(t, rn.stdout))
	}
}

// TestRealtimeSavesConversationUnderSessionID: when a realtime session
// ends, closed or by SIGTERM, the state dir is saved to
// <source>/<last session id>, the id a later Agent's resumeSession
// restores; a session in which no turn ran saves nothing.
func TestRealtimeSavesConversationUnderSessionID(t *testing.T) {
	tests := []struct {
		name    string
		prompt  string
		resume  string
		end     func(t *testing.T, p *realtimePod, s *liveSession)
		code    int
		saved   bool
		prompts []string
	}{
		{name: "a closed session is saved under its session id", prompt: "start the session", code: 0, saved: true,
			prompts: []string{"start the session", "a follow-up"},
			end: func(t *testing.T, p *realtimePod, s *liveSession) {
				if _, err := s.closeSession(p.token); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a session ended by SIGTERM is saved under its session id", prompt: "start the session", code: 143, saved: true,
			prompts: []string{"start the session", "a follow-up"},
			end: func(t *testing.T, _ *realtimePod, s *liveSession) {
				if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a resumed session closed before any turn saves nothing", resume: "5d0c2f1e-7a3b-4c9d-8e21-0a1b2c3d4e5f", code: 0,
			end: func(t *testing.T, p *realtimePod, s *liveSession) {
				if _, err := s.closeSession(p.token); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newConvStore(t, 0)
			spec := realtimeSpec(vendorModels["claude"], tt.prompt)
			spec.ResumeSession = tt.resume
			p := newRealtimePod(t, spec)
			p.useStore(store.srv.URL)
			s := p.serve()
			var sessionID string
			if tt.prompt != "" {
				s.waitIdle(p.token, 1)
				tr, err := s.prompt(p.token, "a follow-up")
				if err != nil || tr.end.GetIsError() {
					t.Fatalf("prompt: %v, %v", tr.end, err)
				}
				sessionID = tr.end.GetSessionId()
			}
			tt.end(t, p, s)
			r := s.exit(30 * time.Second)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			checkNoSecrets(t, r)
			ups := store.uploads()
			if !tt.saved {
				if len(ups) != 0 {
					t.Fatalf("%d uploads, want none", len(ups))
				}
				return
			}
			if len(ups) != 1 || ups[0].path != "/conversations/"+sessionID || ups[0].auth != convSecret {
				t.Fatalf("uploads %v, want one to /conversations/%s", ups, sessionID)
			}
			_, files := archiveFiles(t, ups[0].body)
			transcript := files[p.sessionFile(sessionID)]
			for _, want := range tt.prompts {
				if !strings.Contains(transcript, want) {
					t.Fatalf("the saved session %s lacks the prompt %q: %q", sessionID, want, transcript)
				}
			}
		})
	}
}
