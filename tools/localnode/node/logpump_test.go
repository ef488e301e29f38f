package node

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestADetachingPumpKeepsWhatWasWritten: a node that stops and leaves its
// containers to a successor first moves what they already wrote into the
// log, since a container that ends before it is adopted takes the pipe's
// unread buffer with it.
func TestADetachingPumpKeepsWhatWasWritten(t *testing.T) {
	for i := range 20 {
		dir := t.TempDir()
		for _, name := range []string{stdoutPipe, stderrPipe} {
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// The container's end, opened read-write so it never blocks.
		w, err := os.OpenFile(filepath.Join(dir, stdoutPipe), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		readers, err := openPipes(dir)
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(dir, "0.log")
		p := pumpLogs(readers, logPath)
		if _, err := w.WriteString("before restart\n"); err != nil {
			t.Fatal(err)
		}
		p.close()
		// The container ends while no node watches.
		_ = w.Close()
		raw, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), " stdout F before restart\n") {
			t.Fatalf("round %d: the line written before the node stopped is not in the log: %q", i, raw)
		}
	}
}
