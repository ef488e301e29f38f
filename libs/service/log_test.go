package service

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestNewLoggerRoutesKlogAndControllerRuntimeToOneJSONStream(t *testing.T) {
	var out bytes.Buffer
	prev := slog.Default()
	defer slog.SetDefault(prev)
	if _, err := NewLogger("svc", "debug", &out); err != nil {
		t.Fatal(err)
	}
	slog.Info("from slog")
	klog.InfoS("from klog")
	klog.Flush()
	ctrllog.Log.Info("from controller-runtime")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"from slog", "from klog", "from controller-runtime"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, l)
		}
		if m["msg"] != want[i] || m["service"] != "svc" {
			t.Errorf("line %d: %v", i, m)
		}
	}
}

func TestParseLevelRefusesUnknownLevels(t *testing.T) {
	for _, bad := range []string{"", "verbose", "trace", "2"} {
		if _, err := NewLogger("svc", bad, &bytes.Buffer{}); err == nil {
			t.Errorf("level %q must be refused", bad)
		}
	}
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v", in, got, err)
		}
	}
}
