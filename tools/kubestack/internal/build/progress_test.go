package build

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProgressReports checks the rules of the build's progress lines. Each
// case feeds the go command's output and clock ticks (seconds since the
// step started) and says which lines appear.
func TestProgressReports(t *testing.T) {
	compiled := "k8s.io/apimachinery/pkg/types\nk8s.io/client-go/rest\nk8s.io/kubernetes/cmd/kubectl\n"
	cases := []struct {
		rule   string
		total  int
		output string
		ticks  []int
		want   []string
	}{
		{"quiet when the step ends within the interval", 0, compiled,
			[]int{1, 5, 9}, nil},
		{"reports at least every interval while the step runs", 0, "",
			[]int{1, 9, 10, 11, 19, 20, 25, 31},
			[]string{"kubestack: building: 10s", "kubestack: building: 20s", "kubestack: building: 31s"}},
		{"a late tick does not delay the next report", 0, "",
			[]int{11, 20, 35, 40, 44},
			[]string{"kubestack: building: 11s", "kubestack: building: 20s", "kubestack: building: 35s", "kubestack: building: 40s"}},
		{"counts the packages compiled out of the total", 2403, compiled,
			[]int{10}, []string{"kubestack: building: 3/2403 packages compiled, 10s"}},
		{"counts the packages compiled when the total is unknown", 0, compiled,
			[]int{10}, []string{"kubestack: building: 3 packages compiled, 10s"}},
		{"says the build is linking once every package is compiled", 3, compiled,
			[]int{10}, []string{"kubestack: building: 3/3 packages compiled, linking, 10s"}},
		{"counts module downloads", 0, "go: downloading k8s.io/api v0.36.3\ngo: downloading k8s.io/client-go v0.36.3\n",
			[]int{10}, []string{"kubestack: building: 2 modules downloaded, 10s"}},
		{"compiler errors and messages are not packages", 0,
			"# k8s.io/foo\n./x.go:3:2: undefined: y\ngo: finding module for package z\nnote: module requires Go 1.26\n\n",
			[]int{10}, []string{"kubestack: building: 10s"}},
		{"a package path split across writes counts once", 0, "k8s.io/api/co|re/v1\n",
			[]int{10}, []string{"kubestack: building: 1 packages compiled, 10s"}},
		{"a line without its newline yet is not counted", 0, "k8s.io/api/core/v1",
			[]int{10}, []string{"kubestack: building: 10s"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var log bytes.Buffer
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			p := newProgress(&log, "building", c.total, start, 10*time.Second)
			for _, chunk := range strings.Split(c.output, "|") {
				if _, err := p.Write([]byte(chunk)); err != nil {
					t.Fatal(err)
				}
			}
			ticks := make(chan time.Time)
			done := make(chan struct{})
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				p.watch(ticks, done)
			}()
			for _, s := range c.ticks {
				ticks <- start.Add(time.Duration(s) * time.Second)
			}
			close(done)
			<-watched
			var got []string
			if s := strings.TrimSuffix(log.String(), "\n"); s != "" {
				got = strings.Split(s, "\n")
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("lines:\n%q\nwant:\n%q", got, c.want)
			}
			if p.Output() != strings.ReplaceAll(c.output, "|", "") {
				t.Errorf("the go command's output is not kept whole: %q", p.Output())
			}
		})
	}
}

// TestTheTotalIsWhatGoBuildCompiles: the denominator of the progress line
// is the number of packages `go build -v` then compiles, so the count
// reaches it and the build shows as linking.
func TestTheTotalIsWhatGoBuildCompiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A fresh constant keeps the build cache from holding the packages.
	stamp := fmt.Sprint(time.Now().UnixNano())
	if err := writeModule(dir, map[string]string{
		"go.mod":     "module progress.local/x\n\ngo 1.26\n",
		"sub/sub.go": "package sub\n\n// Stamp is unique per test run.\nconst Stamp = \"" + stamp + "\"\n",
		"main.go":    "package main\n\nimport \"progress.local/x/sub\"\n\nfunc main() { println(sub.Stamp) }\n",
	}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"-trimpath", "-ldflags", "-s -w"}
	total := countToCompile(context.Background(), dir, newProgress(nil, "counting", 0, time.Now(), reportEvery), flags, []string{"."})
	if total < 2 {
		t.Fatalf("the module's two packages are not in the total: %d", total)
	}
	rep := newProgress(nil, "building", total, time.Now(), reportEvery)
	args := append(append([]string{"build", "-v"}, flags...), "-o", filepath.Join(dir, "out"), ".")
	if err := goCmd(context.Background(), dir, rep, args...); err != nil {
		t.Fatal(err)
	}
	if rep.packages != total {
		t.Errorf("go build -v compiled %d packages, the total said %d; output:\n%s", rep.packages, total, rep.Output())
	}
}
