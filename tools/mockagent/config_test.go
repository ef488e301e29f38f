package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestBadEnvironment checks that a malformed MOCKAGENT_* value is refused
// with exit 2 and a message naming the variable, not silently defaulted.
func TestBadEnvironment(t *testing.T) {
	tests := []struct{ name, key, value string }{
		{"delay must be a duration", "MOCKAGENT_DELAY", "soon"},
		{"delay must not be negative", "MOCKAGENT_DELAY", "-1s"},
		{"bytes must be a count", "MOCKAGENT_BYTES", "lots"},
		{"exit must be a number", "MOCKAGENT_EXIT", "one"},
		{"stderr lines must be a count", "MOCKAGENT_STDERR_LINES", "-3"},
		{"steps must be a count", "MOCKAGENT_STEPS", "many"},
		{"mode must be known", "MOCKAGENT_MODE", "explode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.key, tt.value)
			var out, errOut bytes.Buffer
			code := run([]string{"gemini", "--output-format", "stream-json", "--prompt=x"}, &out, &errOut)
			if code != 2 || !strings.Contains(strings.ToUpper(errOut.String()), strings.TrimPrefix(tt.key, "MOCKAGENT_")) {
				t.Errorf("exit %d, stderr %q", code, errOut.String())
			}
			if out.Len() != 0 {
				t.Errorf("printed events before refusing: %q", out.String())
			}
		})
	}
}

// TestStepsAddTextLines checks that MOCKAGENT_STEPS=N adds N numbered
// assistant lines before the usual work, and that the run still succeeds.
func TestStepsAddTextLines(t *testing.T) {
	t.Setenv("MOCKAGENT_STEPS", "3")
	var out, errOut bytes.Buffer
	if code := run([]string{"gemini", "--output-format", "stream-json", "--prompt=x"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	for i := 1; i <= 3; i++ {
		if n := strings.Count(out.String(), fmt.Sprintf("Step %d of 3.", i)); n != 1 {
			t.Errorf("step %d printed %d times, want once", i, n)
		}
	}
	if !strings.Contains(out.String(), "Working on: x") {
		t.Errorf("the usual work is missing after the steps: %q", out.String())
	}
}

// TestHead checks that the echoed prompt is cut on a character boundary.
func TestHead(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short strings are kept", "abc", 5, "abc"},
		{"long strings are cut", "abcdef", 3, "abc"},
		{"a cut never splits a character", "aé", 2, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := head(tt.in, tt.n); got != tt.want {
				t.Errorf("head(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}
