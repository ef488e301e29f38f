package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
)

// snoopAttempt is one Read or Glob of the snoop mode and its result.
type snoopAttempt struct {
	tool, path string
	isError    bool
	text       string
}

// snoopAttempts pairs the snoop mode's tool calls with their results.
func snoopAttempts(t *testing.T, o outcome) []snoopAttempt {
	t.Helper()
	var out []snoopAttempt
	at := map[string]int{}
	for _, e := range o.events {
		switch e.Kind {
		case vendors.KindToolCall:
			var in struct {
				FilePath string `json:"file_path"`
				Pattern  string `json:"pattern"`
			}
			if err := json.Unmarshal(e.ToolInput, &in); err != nil {
				t.Fatal(err)
			}
			at[e.ToolID] = len(out)
			out = append(out, snoopAttempt{tool: e.ToolName, path: in.FilePath + in.Pattern})
		case vendors.KindToolResult:
			i, ok := at[e.ToolID]
			if !ok {
				t.Fatalf("a result of no call: %+v", e)
			}
			out[i].isError, out[i].text = e.IsError, e.Text
		}
	}
	return out
}

// TestSnoopTriesEveryPathAndReportsWhatItGot: the snoop mode reads its
// parent's environment and PID 1's, opens its parent's memory and, for
// writing, its parent's stdout, lists the
// platform's mount directory and reads each file in it (a Secret volume's
// layout of symlinks included), and reports each outcome. Run as root
// here, every attempt succeeds, which shows that the reports carry what
// was read; the end-to-end suites run it as the agent's user.
func TestSnoopTriesEveryPathAndReportsWhatItGot(t *testing.T) {
	if snoopRoot != filepath.Dir(runspec.NATSMountDir) {
		t.Fatalf("the mock snoops %s, but the platform mounts under %s", snoopRoot, filepath.Dir(runspec.NATSMountDir))
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "ca.crt"), []byte("the CA"), 0o440); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"..data": "..2026_01_01", "ca.crt": "..data/ca.crt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	o := runMock(t, "claude", vendors.Invocation{Prompt: "mock:snoop"}, "MOCKAGENT_SNOOP_DIR="+dir)
	if r, ok := o.result(); o.exit != 0 || !ok || r.IsError || o.parseErrs != 0 {
		t.Fatalf("exit %d, result %v %+v, parse errors %d", o.exit, ok, r, o.parseErrs)
	}
	got := snoopAttempts(t, o)
	parent := "/proc/" + strconv.Itoa(os.Getpid())
	// PID 1's environment depends on the machine: only the attempt is
	// checked (any is set).
	want := []struct {
		tool, path, content string
		any                 bool
	}{
		{tool: "Read", path: parent + "/environ", content: "PATH="},
		{tool: "Read", path: "/proc/1/environ", any: true},
		{tool: "Read", path: parent + "/mem", content: "opened " + parent + "/mem"},
		{tool: "Read", path: parent + "/fd/1", content: "opened " + parent + "/fd/1"},
		{tool: "Glob", path: dir + "/**", content: filepath.Join(data, "ca.crt")},
		{tool: "Read", path: filepath.Join(data, "ca.crt"), content: "the CA"},
		{tool: "Read", path: filepath.Join(dir, "ca.crt"), content: "the CA"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d attempts %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.tool != w.tool || g.path != w.path || g.text == "" {
			t.Errorf("attempt %d: %s %s, want %s %s", i+1, g.tool, g.path, w.tool, w.path)
		}
		if !w.any && (g.isError || !strings.Contains(g.text, w.content)) {
			t.Errorf("attempt %d: %s %s (error %v) got %.200q, want %s %s holding %q", i+1, g.tool, g.path, g.isError, g.text, w.tool, w.path, w.content)
		}
	}
}

// TestSnoopReportsRefusals: an attempt that fails is a failed tool result
// naming the error, so a caller can tell a refusal from a wrong path.
func TestSnoopReportsRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	o := runMock(t, "claude", vendors.Invocation{Prompt: "mock:snoop"}, "MOCKAGENT_SNOOP_DIR="+dir)
	got := snoopAttempts(t, o)
	if len(got) != 5 {
		t.Fatalf("attempts %+v, want the four /proc attempts and the listing", got)
	}
	if g := got[4]; g.tool != "Glob" || !g.isError || !strings.Contains(g.text, "no such file or directory") {
		t.Errorf("listing a missing directory reported %+v", g)
	}
}
