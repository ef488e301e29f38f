// Package golden compares a test's output with a file kept in testdata,
// or rewrites the file when the developer asks: the files are contracts
// (payload formats, command lines) whose every change is reviewed as a
// diff.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path. When update is true it
// rewrites the file instead; how says how a developer asks for that (a
// flag or a variable), for the failure message.
func Check(t testing.TB, path string, got []byte, update bool, how string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (%s creates it): %v", how, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (%s rewrites it if intended)\n--- got\n%s\n--- want\n%s", path, how, got, want)
	}
}
