package containers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/testenv"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// TestNATSKilledAndRestartedMidRun is the NATS outage suite: run pods (the
// supervisor's init and run containers from their images, the mock CLI
// streaming a slow run) publish to a NATS container with its JetStream
// files on a volume; NATS is killed with SIGKILL and started again after
// an outage. Every run must end by itself with exit 0, and every event it
// emitted must be in the stream exactly once, in order, or be counted as
// dropped in the run's summary. Both outages are shorter than what the
// supervisor holds back for NATS (its buffer during the run, its exit
// flush after it; docs/supervisor.md), so none may be dropped.
func TestNATSKilledAndRestartedMidRun(t *testing.T) {
	steps := size(400, 1000)
	delay := size(50*time.Millisecond, 40*time.Millisecond)
	// A run lasts about steps×delay.
	runFor := time.Duration(steps) * delay
	tests := []struct {
		name string
		// killAt is when into the runs NATS is killed.
		killAt, outage time.Duration
	}{
		{name: "an outage inside the runs loses nothing", killAt: runFor / 4, outage: size(5*time.Second, 20*time.Second)},
		{name: "an outage past the runs' end, within their exit flush, loses nothing", killAt: runFor * 3 / 4, outage: size(20*time.Second, 45*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			natsOutage(t, size(3, 12), steps, delay, tt.killAt, tt.outage)
		})
	}
}

// natsOutage runs the suite once: runs pods of steps events delay apart,
// NATS killed killAt after the first started (once every run container
// has published) for outage.
func natsOutage(t *testing.T, runs, steps int, delay, killAt, outage time.Duration) {
	runFor := time.Duration(steps) * delay
	net := containers.NewNet(t)
	// The volume is the image's user's to write, as a pod's fsGroup makes it.
	natsData := t.TempDir()
	if err := os.Chmod(natsData, 0o777); err != nil {
		t.Fatal(err)
	}
	nc := net.Start(containers.Spec{
		Alias: "nats", Image: images["nats"], Ports: []string{"4222/tcp"},
		Binds: []string{natsData + ":/data"},
	})
	js := connectJetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := events.EnsureStream(ctx, js, events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatalf("create the event stream: %v", err)
	}

	pods := make([]*runPod, runs)
	first := time.Now()
	for i := range pods {
		pods[i] = startRunPod(t, net, fmt.Sprintf("run-%d", i), map[string]string{
			runspec.EnvNATSURL: "nats://nats:4222",
			"MOCKAGENT_MODE":   "slow", "MOCKAGENT_DELAY": delay.String(), "MOCKAGENT_STEPS": fmt.Sprint(steps),
		})
	}

	// Into the runs (counted from the first: starting them all takes a
	// while), then the outage: SIGKILL, as a node crash would. Not before
	// every run has stored an event, though: a supervisor that connects
	// only after the kill (a slow start under load) would never see the
	// outage it is there to see.
	waitPublishing(t, js, pods)
	time.Sleep(time.Until(first.Add(killAt)))
	for _, p := range pods {
		if !p.run.IsRunning() {
			t.Fatalf("%s ended before the outage began: the suite would test nothing", p.name)
		}
	}
	began := time.Now()
	nc.Kill()
	time.Sleep(outage)
	nc.Restart()
	restarted := time.Since(began)

	js = connectJetStream(t, nc)
	var stored, emitted, dropped uint64
	for _, p := range pods {
		if code := p.run.Wait(runFor + outage + 2*time.Minute); code != 0 {
			t.Errorf("%s exited %d, want 0", p.name, code)
			continue
		}
		if !strings.Contains(p.run.Output(), "nats disconnected") {
			t.Errorf("%s's supervisor never saw NATS go away: the outage missed the run", p.name)
		}
		sum := p.summary(t).Add(p.init)
		evs := readRun(t, js, "team-a", p.name)
		checkExactlyOnce(t, p.name, evs)
		var n uint64
		for _, c := range sum.Events {
			n += c
		}
		if got := uint64(len(evs)) + sum.NATSDropped; got != n {
			t.Errorf("%s emitted %d events; the stream holds %d and %d were counted dropped", p.name, n, len(evs), sum.NATSDropped)
		}
		if sum.NATSDropped != 0 {
			t.Errorf("%s dropped %d events across a %s outage, shorter than what its supervisor holds back for NATS", p.name, sum.NATSDropped, outage)
		}
		if len(evs) > 0 && lifecycleOf(evs[len(evs)-1]) != "agent/succeeded" {
			t.Errorf("%s's stream ends with %v, not the run's success", p.name, evs[len(evs)-1].GetKind())
		}
		stored, emitted, dropped = stored+uint64(len(evs)), emitted+n, dropped+sum.NATSDropped
	}
	testenv.BenchReport(t, fmt.Sprintf("NATS killed %s into %s runs: %d runs, %d events emitted, %d stored once, %d dropped; outage %s (down to up again %s)",
		killAt.Round(time.Second), runFor.Round(time.Second), runs, emitted, stored, dropped, outage, restarted.Round(100*time.Millisecond)))
}

// runPod is one run pod made of containers as the Job's pod is: the
// supervisor image's init container copies the supervisor onto the agent
// volume, then the agent container (the mock CLIs' image) runs it.
type runPod struct {
	name     string
	agentDir string
	run      *containers.Container
	// init is what the init container emitted: the stream holds its
	// events before the agent container's, in one sequence.
	init runspec.Summary
}

// startRunPod starts one run's init container, waits for it, then starts
// its agent container with env added to the run's environment.
func startRunPod(t *testing.T, net *containers.Net, name string, env map[string]string) *runPod {
	t.Helper()
	p := &runPod{name: name, agentDir: t.TempDir()}
	workspace := t.TempDir()
	for _, d := range []string{p.agentDir, workspace} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// Written only when it exists, as the kubelet's file does.
	termLog := filepath.Join(p.agentDir, "termination-log")
	if err := os.WriteFile(termLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(termLog, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	spec, err := runspec.Encode(&runspec.Spec{Model: "claude-sonnet-4-5", Prompt: "count the steps", PermissionMode: "auto", Execution: runspec.ExecutionJob})
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		runspec.EnvName:              spec,
		runspec.EnvAgentName:         name,
		runspec.EnvAgentNamespace:    "team-a",
		runspec.EnvAgentUID:          "uid-" + name,
		runspec.EnvStationName:       "station-1",
		runspec.EnvPodName:           name + "-pod",
		runspec.EnvHome:              runspec.AgentDir,
		runspec.EnvPath:              "/usr/local/bin",
		"SUPERVISOR_TERMINATION_LOG": runspec.AgentDir + "/termination-log",
	}
	for k, v := range env {
		base[k] = v
	}
	binds := []string{p.agentDir + ":" + runspec.AgentDir, workspace + ":" + runspec.WorkspaceDir}
	init := net.Start(containers.Spec{
		Alias: name + "-init", Image: images["supervisor"], Entrypoint: []string{"/supervisor", runspec.CommandInit},
		Env: base, Binds: binds,
	})
	if code := init.Wait(2 * time.Minute); code != 0 {
		t.Fatalf("%s's init container exited %d", name, code)
	}
	p.init = p.summary(t)
	p.run = net.Start(containers.Spec{
		Alias: name, Image: images["mockagent"], Entrypoint: []string{runspec.SupervisorBinary, runspec.CommandRun},
		Env: base, Binds: binds, User: "1000:1000",
	})
	return p
}

// summary is the delivery summary the run's supervisor left in its
// termination log.
func (p *runPod) summary(t *testing.T) runspec.Summary {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.agentDir, "termination-log"))
	if err != nil {
		t.Fatalf("%s's termination log: %v", p.name, err)
	}
	s, err := runspec.ParseSummary(string(raw))
	if err != nil {
		t.Fatalf("%s's termination log %q: %v", p.name, raw, err)
	}
	return s
}

// connectJetStream connects the test to NATS through its published port,
// waiting (bounded) until the server answers JetStream requests.
func connectJetStream(t *testing.T, c *containers.Container) jetstream.JetStream {
	t.Helper()
	url := "nats://" + c.HostAddr("4222/tcp")
	deadline := time.Now().Add(time.Minute)
	for {
		nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
		if err == nil {
			js, jerr := jetstream.New(nc)
			if jerr == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = js.AccountInfo(ctx)
				cancel()
				if err == nil {
					t.Cleanup(nc.Close)
					return js
				}
			}
			nc.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("NATS at %s did not answer within a minute: %v", url, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitPublishing waits, up to a minute, until every run has an event
// stored past its init container's: each run's supervisor is connected to
// NATS.
func waitPublishing(t *testing.T, js jetstream.JetStream, pods []*runPod) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, p := range pods {
		// The init container's events are in the stream before the run
		// container connects: only one past them shows the run's own
		// supervisor is connected.
		var fromInit int
		for _, c := range p.init.Events {
			fromInit += int(c)
		}
		for len(readRun(t, js, "team-a", p.name)) <= fromInit {
			if time.Now().After(deadline) {
				t.Fatalf("%s stored no event within a minute of its start: its supervisor never reached NATS", p.name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// readRun reads every event of one run (Agent ns/agent) from the stream.
func readRun(t *testing.T, js jetstream.JetStream, ns, agent string) []*eventsv1.RunEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs, err := events.ReadAll(ctx, js, events.Filter{Namespace: ns, Agent: agent})
	if err != nil {
		t.Fatalf("read %s's events: %v", agent, err)
	}
	return evs
}

// checkExactlyOnce fails when a run's stored events are not its sequence
// 1..n, each once: a duplicate, a gap or a reordering.
func checkExactlyOnce(t *testing.T, name string, evs []*eventsv1.RunEvent) {
	t.Helper()
	ids := make(map[string]bool, len(evs))
	for i, ev := range evs {
		if want := uint64(i + 1); ev.GetSequence() != want {
			t.Errorf("%s: stored event %d has sequence %d, want %d (stored twice, lost or out of order)", name, i, ev.GetSequence(), want)
			return
		}
		if ids[ev.GetId()] {
			t.Errorf("%s: event %s stored twice", name, ev.GetId())
			return
		}
		ids[ev.GetId()] = true
	}
}

// lifecycleOf is "phase/status" of a lifecycle event, "" otherwise.
func lifecycleOf(ev *eventsv1.RunEvent) string {
	if lc := ev.GetLifecycle(); lc != nil {
		return lc.GetPhase() + "/" + lc.GetStatus()
	}
	return ""
}
