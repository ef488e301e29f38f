package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/turntest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// testKey stands in for the shared key Secret; the token is derived from
// the pod's uid exactly as the controller derives it.
var testKey = bytes.Repeat([]byte("k"), realtime.MinKeyBytes)

// realtimeSpec is a realtime run of model with prompt as its initial
// prompt (empty for none).
func realtimeSpec(model, prompt string) *runspec.Spec {
	return &runspec.Spec{Model: model, Prompt: prompt, PermissionMode: "auto", Execution: "realtime"}
}

// realtimePod is a run pod set up for a realtime session: its token file,
// a loopback listen address, a short grace, and a wrapper in front of the
// mock CLIs that records every start of a CLI.
type realtimePod struct {
	*pod
	token string
	// starts is the file each CLI start appends its argv to, one line per
	// start; it does not exist until a CLI started.
	starts string
}

func newRealtimePod(t *testing.T, spec *runspec.Spec) *realtimePod {
	t.Helper()
	p := newPod(t, spec)
	dir := t.TempDir()
	rp := &realtimePod{pod: p, token: realtime.Token(testKey, p.env[runspec.EnvAgentUID]), starts: filepath.Join(dir, "starts.log")}
	bin := filepath.Join(dir, "bin")
	for _, v := range []string{"claude", "codex", "gemini", "opencode"} {
		script := "#!/bin/sh\necho \"$*\" >> " + rp.starts + "\nexec " + filepath.Join(mockDir, "mockagent") + " --vendor " + v + " \"$@\"\n"
		mustWrite(t, filepath.Join(bin, v), []byte(script))
		if err := os.Chmod(filepath.Join(bin, v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.env["PATH"] = bin + ":" + p.env["PATH"]
	// A trailing newline, as a hand-made Secret often has.
	p.env[realtime.EnvToken] = rp.token + "\n"
	p.env[realtime.EnvAddr] = "127.0.0.1:0"
	p.env[runspec.EnvExitGraceMS] = "1000"
	return rp
}

// cliStarts returns the argv of every CLI start so far.
func (p *realtimePod) cliStarts() []string {
	b, err := os.ReadFile(p.starts)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// liveSession is a running `supervisor run` serving a session.
type liveSession struct {
	t        *testing.T
	cmd      *exec.Cmd
	out, err *lockedio.Buffer
	addr     string
	conn     *grpc.ClientConn
	client   supervisorv1.SessionServiceClient
	waited   chan struct{}
}

// serve starts the supervisor and connects to it once it logged its
// address.
func (p *realtimePod) serve() *liveSession {
	p.t.Helper()
	cmd, out, errb := p.start("run")
	s := &liveSession{t: p.t, cmd: cmd, out: out, err: errb, waited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.waited) }()
	deadline := time.Now().Add(30 * time.Second)
	for s.addr == "" {
		if time.Now().After(deadline) {
			p.t.Fatalf("no serving log line; stderr:\n%s", errb.Bytes())
		}
		select {
		case <-s.waited:
			p.t.Fatalf("supervisor exited %d before serving; stderr:\n%s", cmd.ProcessState.ExitCode(), errb.Bytes())
		case <-time.After(20 * time.Millisecond):
		}
		for _, line := range bytes.Split(errb.Bytes(), []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && m["msg"] == "realtime session serving" {
				s.addr, _ = m["addr"].(string)
			}
		}
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = conn.Close() })
	s.conn, s.client = conn, supervisorv1.NewSessionServiceClient(conn)
	p.t.Cleanup(func() {
		select {
		case <-s.waited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.waited
		}
	})
	return s
}

// exit waits for the supervisor to end and returns how it ended.
func (s *liveSession) exit(within time.Duration) result {
	s.t.Helper()
	select {
	case <-s.waited:
	case <-time.After(within):
		s.t.Fatalf("supervisor still running after %v; stderr:\n%s", within, lastBytes(s.err.Bytes(), 4000))
	}
	return result{code: s.cmd.ProcessState.ExitCode(), stdout: s.out.Bytes(), stderr: s.err.Bytes()}
}

// turn is what one Prompt streamed back.
type turn struct {
	events []*eventsv1.RunEvent
	end    *supervisorv1.TurnEnd
}

// prompt sends one prompt and reads its stream to the end.
func (s *liveSession) prompt(token, text string) (turn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.client.Prompt(ctx, &supervisorv1.PromptRequest{Token: token, Text: text})
	if err != nil {
		return turn{}, err
	}
	return readTurn(s.t, stream)
}

// readTurn reads a turn's stream, checking that exactly one TurnEnd comes
// and comes last.
func readTurn(t *testing.T, stream grpc.ServerStreamingClient[supervisorv1.PromptResponse]) (turn, error) {
	t.Helper()
	events, end, err := turntest.Read(t, stream)
	return turn{events: events, end: end}, err
}

// info asks the session's state with the pod's token.
func (s *liveSession) info(token string) *supervisorv1.InfoResponse {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := s.client.Info(ctx, &supervisorv1.InfoRequest{Token: token})
	if err != nil {
		s.t.Fatalf("Info: %v", err)
	}
	return in
}

// waitIdle waits until no turn runs and turns have started.
func (s *liveSession) waitIdle(token string, turns int32) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		in := s.info(token)
		if in.GetState() == supervisorv1.SessionState_SESSION_STATE_IDLE && in.GetTurns() == turns {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("session not idle after %d turns: %v", turns, in)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closeSession closes the session with token.
func (s *liveSession) closeSession(token string) (*supervisorv1.CloseResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.client.Close(ctx, &supervisorv1.CloseRequest{Token: token})
}

// terminal is the last lifecycle envelope the supervisor printed.
func terminal(t *testing.T, stdout []byte) *eventsv1.Lifecycle {
	t.Helper()
	_, own := stdoutEvents(t, stdout)
	if len(own) == 0 {
		t.Fatal("no lifecycle events on stdout")
	}
	return own[len(own)-1].GetLifecycle()
}
