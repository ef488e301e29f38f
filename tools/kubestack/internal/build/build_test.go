package build

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKubeModuleFile(t *testing.T) {
	mod := KubeModuleFile("v1.36.3")
	for _, want := range []string{
		"require k8s.io/kubernetes v1.36.3",
		"replace k8s.io/api => k8s.io/api v0.36.3",
		"replace k8s.io/client-go => k8s.io/client-go v0.36.3",
		"replace k8s.io/streaming => k8s.io/streaming v0.36.3",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("staging modules are replaced by their published release: missing %q in\n%s", want, mod)
		}
	}
	if got := strings.Count(mod, "replace "); got != len(StagingModules) {
		t.Errorf("every staging module is replaced: %d replaces, want %d", got, len(StagingModules))
	}
}

func TestKubeLDFlagsStampTheRelease(t *testing.T) {
	f := kubeLDFlags("v1.36.3")
	for _, want := range []string{
		"k8s.io/component-base/version.gitVersion=v1.36.3",
		"k8s.io/component-base/version.gitMajor=1",
		"k8s.io/component-base/version.gitMinor=36",
		"k8s.io/client-go/pkg/version.gitVersion=v1.36.3",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("missing %q in %q", want, f)
		}
	}
}

// fakeEntry writes a cache entry with small files standing in for binaries.
func fakeEntry(t *testing.T) Options {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kube", "v1-etcd-v3")
	opts := Options{Dir: dir, WorkDir: filepath.Join(t.TempDir(), "src"), KubeVersion: "v1.36.3", EtcdVersion: "v3.6.8", Binaries: []string{"etcd", "kube-apiserver"}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := Manifest{KubeVersion: opts.KubeVersion, EtcdVersion: opts.EtcdVersion, SHA256: map[string]string{}}
	for _, b := range opts.Binaries {
		p := filepath.Join(dir, b)
		if err := os.WriteFile(p, []byte("#!/bin/true\n"+b), 0o755); err != nil {
			t.Fatal(err)
		}
		sum, err := fileSHA256(p)
		if err != nil {
			t.Fatal(err)
		}
		m.SHA256[b] = sum
	}
	raw, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return opts
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, o Options)
		wantErr string
	}{
		{"an intact entry is reused", func(*testing.T, Options) {}, ""},
		{"a changed binary is a corrupt entry", func(t *testing.T, o Options) {
			if err := os.WriteFile(filepath.Join(o.Dir, "etcd"), []byte("truncated"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "checksum mismatch"},
		{"a missing binary is a corrupt entry", func(t *testing.T, o Options) {
			if err := os.Remove(filepath.Join(o.Dir, "kube-apiserver")); err != nil {
				t.Fatal(err)
			}
		}, "kube-apiserver"},
		{"a missing manifest means no entry", func(t *testing.T, o Options) {
			if err := os.Remove(filepath.Join(o.Dir, ManifestName)); err != nil {
				t.Fatal(err)
			}
		}, "no manifest"},
		{"a garbled manifest is a corrupt entry", func(t *testing.T, o Options) {
			if err := os.WriteFile(filepath.Join(o.Dir, ManifestName), []byte("{not json"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := fakeEntry(t)
			c.corrupt(t, o)
			err := Check(o)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("want error containing %q, got %v", c.wantErr, err)
			}
		})
	}
}

func TestCheckRejectsAnotherVersion(t *testing.T) {
	o := fakeEntry(t)
	o.KubeVersion = "v1.99.0"
	if err := Check(o); err == nil || !strings.Contains(err.Error(), "v1.99.0") {
		t.Fatalf("a version bump must not reuse the entry: %v", err)
	}
}

func TestEnsureReusesAValidEntryWithoutBuilding(t *testing.T) {
	o := fakeEntry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// WorkDir does not exist: any build attempt would have to create modules
	// and run the go command, which a valid entry must skip.
	if err := Ensure(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.WorkDir); !os.IsNotExist(err) {
		t.Fatalf("a valid entry was rebuilt (work dir created: %v)", err)
	}
}

func TestAFailedBuildShowsTheCompilerError(t *testing.T) {
	dir := t.TempDir()
	if err := writeModule(dir, map[string]string{
		"go.mod":  "module broken.local/x\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() { undefinedThing() }\n",
	}); err != nil {
		t.Fatal(err)
	}
	err := goCmd(context.Background(), dir, newProgress(nil, "building", 0, time.Now(), reportEvery), "build", "-v", "-o", filepath.Join(dir, "out"), ".")
	if err == nil {
		t.Fatal("build of broken code succeeded")
	}
	if !strings.Contains(err.Error(), "undefined: undefinedThing") {
		t.Fatalf("error hides the compiler output: %v", err)
	}
}
