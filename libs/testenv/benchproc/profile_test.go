package benchproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProfiledProcess: a binary built with the benchprofile tag and started
// with StartProfiled answers its CPU profile, its heap profile and its
// memory classes; one started with Start answers none and fails nothing.
func TestProfiledProcess(t *testing.T) {
	b := &Binary{Pkg: "./testdata/profiled"}
	t.Cleanup(b.Remove)
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpu")
	p := StartProfiled(t, exec.Command(b.Path(t, "benchprofile")), cpu)
	p.CPUProfile(t, "start")
	p.CPUProfile(t, "stop")
	if fi, err := os.Stat(cpu); err != nil || fi.Size() == 0 {
		t.Fatalf("CPU profile: %v, want a non-empty file", err)
	}
	heap := filepath.Join(dir, "heap")
	p.HeapProfile(t, heap)
	if fi, err := os.Stat(heap); err != nil || fi.Size() == 0 {
		t.Fatalf("heap profile: %v, want a non-empty file", err)
	}
	goroutines := filepath.Join(dir, "goroutine")
	p.GoroutineProfile(t, goroutines)
	if raw, err := os.ReadFile(goroutines); err != nil || !strings.Contains(string(raw), "goroutine profile: total") {
		t.Fatalf("goroutine profile: %v, %.80q; want the goroutines as text", err, raw)
	}
	got := p.MemoryClasses(t)
	for _, want := range []string{"heap/objects ", "heap/stacks ", "total ", "heap/goal ", "goroutines "} {
		if !strings.Contains(got, want) {
			t.Fatalf("memory classes %q lack %q", got, want)
		}
	}

	stop := p.SampleMemoryPeak(t, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if rss, classes := stop(); rss <= 0 || !strings.Contains(classes, "total ") {
		t.Fatalf("peak sample: %.1f MiB, %q; want the RSS and its classes", rss, classes)
	}

	plain := Start(t, exec.Command(b.Path(t)))
	if got := plain.MemoryClasses(t); got != "" {
		t.Fatalf("a process started without profiling answered memory classes %q", got)
	}
	if rss, classes := plain.SampleMemoryPeak(t, time.Millisecond)(); rss != 0 || classes != "" {
		t.Fatalf("a process started without profiling was sampled: %.1f MiB, %q", rss, classes)
	}
}

func TestFormatMemoryClasses(t *testing.T) {
	for _, tc := range []struct{ name, raw, want string }{
		{"each class in MiB under its short name",
			"/memory/classes/heap/objects:bytes 12582912\n/memory/classes/total:bytes 33554432\n/gc/heap/goal:bytes 15728640\n",
			"heap/objects 12.0, total 32.0, heap/goal 15.0"},
		{"goroutines are counted, not sized", "/sched/goroutines:goroutines 312\n", "goroutines 312"},
		{"a line that is not a name and a count is passed over",
			"garbage\n/memory/classes/other:bytes x\n/memory/classes/other:bytes 1048576", "other 1.0"},
		{"nothing answered, nothing said", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatMemoryClasses(tc.raw); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
