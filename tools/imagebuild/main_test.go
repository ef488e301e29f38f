package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestRunWritesATarballAndPrintsItsDigest(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "svc")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "svc.tar")
	args := []string{"--name", "agentplane/svc:0.1.0", "--binary", bin + "=/svc", "--symlink", "/usr/local/bin/x=/svc",
		"--created", "2026-11-30T00:11:55+00:00", "--version", "0.1.0", "--tarball", out}
	var stdout1, stdout2, stderr bytes.Buffer
	if err := run(args, &stdout1, &stderr); err != nil {
		t.Fatalf("run: %v (%s)", err, stderr.String())
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The tarball keeps the config, so docker's image id, not the manifest.
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	line := stdout1.String()
	if f := strings.Fields(line); len(f) != 5 || f[0] != "agentplane/svc:0.1.0" || !strings.HasPrefix(f[1], "sha256:") || f[2] != id.Hex[:12] {
		t.Fatalf("output %q does not name the image, its digest and its id %s", line, id.Hex[:12])
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["org.opencontainers.image.title"]; got != "svc" {
		t.Errorf("title %q, want the name's last element", got)
	}
	if err := run(args, &stdout2, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout1.String() != stdout2.String() {
		t.Fatalf("a second run differs:\n%s%s", stdout1.String(), stdout2.String())
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(args, &stdout2, &stderr); err != nil {
		t.Fatal(err)
	}
	if second, err := os.ReadFile(out); err != nil || !bytes.Equal(first, second) {
		t.Fatalf("the tarball differs between runs (%v)", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--name", "agentplane/svc:0.1.0", "--binary", "/bin/sh=/svc", "--created", "2026-11-30T00:11:55Z",
		"--tarball", filepath.Join(dir, "x.tar")}
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a cert"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"--binary", "/bin/sh=/svc", "--created", "2026-11-30T00:11:55Z", "--tarball", "x"}, "required"},
		{"no output", []string{"--name", "a/b:1", "--binary", "/bin/sh=/svc", "--created", "2026-11-30T00:11:55Z"}, "required"},
		{"created not RFC 3339", append(clone(base), "--created", "yesterday"), "--created"},
		{"binary without =", append(clone(base), "--binary", "/bin/sh"), "SRC=PATH"},
		{"symlink without =", append(clone(base), "--symlink", "/x"), "PATH=TARGET"},
		{"CA file that is no bundle", append(clone(base), "--ca-file", garbage), "CA bundle"},
		{"name without tag", append(clone(base), "--name", "agentplane/svc"), "image name"},
		{"stray argument", append(clone(base), "extra"), "unexpected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// clone copies s, so appending in one case never changes another.
func clone(s []string) []string { return append([]string(nil), s...) }

func TestTitleOf(t *testing.T) {
	for in, want := range map[string]string{
		"agentplane/agent-controller:0.1.0": "agent-controller",
		"registry.test:5000/a/mockagent:1":  "mockagent",
		"fakevendor:dev":                    "fakevendor",
	} {
		if got := titleOf(in); got != want {
			t.Errorf("titleOf(%q) = %q, want %q", in, got, want)
		}
	}
}
