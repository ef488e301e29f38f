package build

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// reportEvery is how often a running go command is reported: a cold build
// takes minutes, and a terminal that stays silent that long looks hung.
const reportEvery = 10 * time.Second

// progress is fed the go command's combined output (it is the command's
// Stdout and Stderr) and turns it into one line on log at least every
// interval while the command runs. It counts the package paths `go build -v`
// prints as it compiles them and the "go: downloading" lines of module
// fetches, and it keeps the whole output for the error message of a failed
// command.
type progress struct {
	log      io.Writer
	step     string // what the command does, e.g. "building etcd v3.6.8"
	total    int    // packages the build will compile; 0 when unknown
	interval time.Duration

	mu       sync.Mutex
	out      bytes.Buffer
	partial  []byte // the last line, until its newline arrives
	packages int
	modules  int
	start    time.Time
	next     time.Time // when the next report is due
}

func newProgress(log io.Writer, step string, total int, start time.Time, interval time.Duration) *progress {
	if log == nil {
		log = io.Discard
	}
	return &progress{log: log, step: step, total: total, interval: interval, start: start, next: start.Add(interval)}
}

// Write keeps b and counts the complete lines in it.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.count(strings.TrimSpace(string(p.partial[:i])))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

func (p *progress) count(line string) {
	switch {
	case strings.HasPrefix(line, "go: downloading "):
		p.modules++
	case isPackagePath(line):
		p.packages++
	}
}

// isPackagePath tells a package `go build -v` names from the rest of the
// go command's output: messages ("go: ..."), error headers ("# pkg") and
// compiler errors ("file.go:12:3: ...") all hold a space or a colon.
func isPackagePath(line string) bool {
	return line != "" && !strings.HasPrefix(line, "#") && !strings.ContainsAny(line, " \t:")
}

// Output is everything the command printed so far.
func (p *progress) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// tick writes a report when one is due: one interval after the start and
// every interval after that, so a step that ends within interval prints
// nothing. Due times stay on the start's grid, so a tick that arrives a
// little late does not push every later report back.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.next) {
		return
	}
	p.next = p.next.Add(p.interval)
	if !now.Before(p.next) {
		p.next = now.Add(p.interval)
	}
	fmt.Fprintf(p.log, "kubestack: %s: %s\n", p.step, p.status(now))
}

func (p *progress) status(now time.Time) string {
	var parts []string
	if p.modules > 0 {
		parts = append(parts, fmt.Sprintf("%d modules downloaded", p.modules))
	}
	switch {
	case p.total > 0 && p.packages >= p.total:
		parts = append(parts, fmt.Sprintf("%d/%d packages compiled, linking", p.packages, p.total))
	case p.total > 0:
		parts = append(parts, fmt.Sprintf("%d/%d packages compiled", p.packages, p.total))
	case p.packages > 0:
		parts = append(parts, fmt.Sprintf("%d packages compiled", p.packages))
	}
	parts = append(parts, now.Sub(p.start).Round(time.Second).String())
	return strings.Join(parts, ", ")
}

// watch calls tick with every time ticks delivers until done is closed.
func (p *progress) watch(ticks <-chan time.Time, done <-chan struct{}) {
	for {
		select {
		case now := <-ticks:
			p.tick(now)
		case <-done:
			return
		}
	}
}
