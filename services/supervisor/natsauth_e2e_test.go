package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
)

// TestARunPublishesWithTheCredentialTheControllerPassed runs a pod's two
// supervisor steps against a NATS server that admits only credentials,
// with the run's own credential in their environment (which may publish
// the run's events but neither read nor manage the stream): both steps'
// events are stored, in order, and the CLI, which prints its environment,
// sees neither the server nor the credential.
func TestARunPublishesWithTheCredentialTheControllerPassed(t *testing.T) {
	t.Parallel()
	p := newPod(t, execSpec(`env; echo '`+resultLine+`'`, "x")).withSecuredNATS()
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("init exit %d", r.code)
	}
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("run exit %d", r.code)
	}
	evs := p.natsEvents()
	checkStream(t, evs, 1)
	if len(evs) < 3 || lifecycle(evs[0]) != "init/started" || lifecycle(evs[len(evs)-1]) != "agent/succeeded" {
		var got []string
		for _, ev := range evs {
			got = append(got, lifecycle(ev))
		}
		t.Fatalf("stored %v, want the init step's and the run's events", got)
	}
	// The JWT and the seed are the creds' long lines.
	for _, line := range strings.Split(p.env[runspec.EnvNATSCreds], "\n") {
		if len(line) > 40 && bytes.Contains(r.stdout, []byte(line)) {
			t.Errorf("the CLI's output holds a line of the run's credential (%d bytes)", len(line))
		}
	}
	for _, name := range []string{runspec.EnvNATSURL, runspec.EnvNATSCreds, runspec.EnvNATSCAFile, runspec.EnvNATSURLOverride} {
		if bytes.Contains(r.stdout, []byte("\n"+name+"=")) || bytes.HasPrefix(r.stdout, []byte(name+"=")) {
			t.Errorf("the CLI's environment has %s", name)
		}
	}
	if !bytes.Contains(r.stdout, []byte("\n"+runspec.EnvAgentName+"=")) {
		t.Error("the CLI's printed environment is not in stdout: the check above proves nothing")
	}
}
