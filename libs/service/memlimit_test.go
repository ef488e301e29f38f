package service

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestLimitMemory: the runtime's soft limit follows the container's
// memory limit unless the operator set one.
func TestLimitMemory(t *testing.T) {
	const container = 256 << 20
	cases := []struct {
		rule   string
		env    map[string]string
		limit  memlimit.Provider
		want   int64
		logHas string
	}{
		{"the soft limit is 90 % of the container's limit", nil, memlimit.Limit(container), container * 9 / 10, "GOMEMLIMIT is updated"},
		{"GOMEMLIMIT set by the operator wins", map[string]string{"GOMEMLIMIT": "100MiB"}, memlimit.Limit(container), math.MaxInt64, "already set"},
		{"AUTOMEMLIMIT=off leaves the runtime's default", map[string]string{"AUTOMEMLIMIT": "off"}, memlimit.Limit(container), math.MaxInt64, "off"},
		{"AUTOMEMLIMIT sets another ratio", map[string]string{"AUTOMEMLIMIT": "0.5"}, memlimit.Limit(container), container / 2, "GOMEMLIMIT is updated"},
		{"no limit on the container leaves the runtime's default", nil, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			before := debug.SetMemoryLimit(math.MaxInt64)
			t.Cleanup(func() { debug.SetMemoryLimit(before) })
			t.Setenv("GOMEMLIMIT", "")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.env["AUTOMEMLIMIT"] == "" {
				// Unset, not empty: the library reads an empty one as a ratio.
				unsetenv(t, "AUTOMEMLIMIT")
			}
			var logs bytes.Buffer
			got := limitMemory(slog.New(slog.NewTextHandler(&logs, nil)), c.limit)
			if got != c.want || debug.SetMemoryLimit(-1) != c.want {
				t.Fatalf("limit %d (runtime %d), want %d; logs %s", got, debug.SetMemoryLimit(-1), c.want, logs.String())
			}
			if c.logHas != "" && !strings.Contains(logs.String(), c.logHas) {
				t.Errorf("logs %q, want them to say %q", logs.String(), c.logHas)
			}
		})
	}
}

// unsetenv removes name from the environment for the rest of the test.
func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // restores the old value after the test
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultGCPercent: the service's GC target applies unless the
// operator set GOGC (which the runtime read at start).
func TestDefaultGCPercent(t *testing.T) {
	cases := []struct {
		rule    string
		gogc    string
		runtime int // what the runtime took from GOGC at start
		want    int
	}{
		{"without GOGC the service's target applies", "", 100, 25},
		{"GOGC set by the operator wins", "80", 80, 80},
		{"GOGC=off set by the operator wins", "off", -1, -1},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			before := debug.SetGCPercent(c.runtime)
			t.Cleanup(func() { debug.SetGCPercent(before) })
			t.Setenv("GOGC", c.gogc)
			DefaultGCPercent(25)
			if got := debug.SetGCPercent(c.runtime); got != c.want {
				t.Fatalf("GC percent %d, want %d", got, c.want)
			}
		})
	}
}
