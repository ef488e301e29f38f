package benchproc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestBinary: the first call builds with its tags, later calls reuse that
// build, Remove deletes it, and a package that does not build fails the
// test that asked for it.
func TestBinary(t *testing.T) {
	b := &Binary{Pkg: "./testdata/hello"}
	path := b.Path(t, "loud")
	if again := b.Path(t); again != path {
		t.Fatalf("second Path = %s, want the first build %s", again, path)
	}
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "HELLO" {
		t.Fatalf("the binary printed %q, want HELLO: the first call's tags build it", got)
	}
	b.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after Remove, stat %s: %v, want not exist", path, err)
	}
	(&Binary{}).Remove() // nothing built: nothing to do

	broken := &Binary{Pkg: "./testdata/none"}
	for i := range 2 {
		ft := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); broken.Path(ft) }()
		<-done
		if !strings.Contains(ft.msg, "go build ./testdata/none") {
			t.Fatalf("call %d: failed with %q, want the go build error", i+1, ft.msg)
		}
	}
}

// fatalTB records Fatal's message and ends the goroutine, as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
