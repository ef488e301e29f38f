package emit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSequenceFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), SequenceFile)
	if got := ReadSequence(p); got != 0 {
		t.Fatalf("missing file gives %d, want 0", got)
	}
	if err := WriteSequence(p, 42); err != nil {
		t.Fatal(err)
	}
	if got := ReadSequence(p); got != 42 {
		t.Fatalf("got %d, want 42", got)
	}
	if err := os.WriteFile(p, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadSequence(p); got != 0 {
		t.Fatalf("garbage gives %d, want 0", got)
	}
}

func TestStartedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), StartedFile)
	if _, ok := ReadStarted(p); ok {
		t.Fatal("missing file read as a time")
	}
	now := time.Now().Truncate(time.Millisecond)
	if err := WriteStarted(p, now); err != nil {
		t.Fatal(err)
	}
	if got, ok := ReadStarted(p); !ok || !got.Equal(now) {
		t.Fatalf("got %v, %v; want %v", got, ok, now)
	}
}
