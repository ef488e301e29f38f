package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Modes the mock plays; see the package comment.
const (
	modeSuccess   = "success"
	modeFail      = "fail"
	modeCrash     = "crash"
	modeSlow      = "slow"
	modeBig       = "big"
	modeMalformed = "malformed"
	modeLinger    = "linger"
	modeHang      = "hang"
	modeSnoop     = "snoop"
)

var directive = regexp.MustCompile(`mock:([a-z]+)`)

// config is how this run behaves, from the prompt and the environment.
type config struct {
	mode     string
	delay    time.Duration
	bytes    int
	exitCode int
	session  string
	// stderrLines are diagnostics printed to stderr alongside the events,
	// to exercise a reader that must drain both pipes.
	stderrLines int
	// steps are extra assistant text lines before the usual work.
	steps int
}

func configFromEnv(inv invocation) (config, error) {
	c := config{mode: modeSuccess, bytes: 10 << 20, session: os.Getenv("MOCKAGENT_SESSION")}
	if m := os.Getenv("MOCKAGENT_MODE"); m != "" {
		c.mode = m
	}
	// The prompt's directive wins: it is the more specific of the two.
	if m := directive.FindStringSubmatch(inv.prompt); m != nil {
		c.mode = m[1]
	}
	switch c.mode {
	case modeSuccess, modeSlow, modeBig, modeMalformed, modeSnoop:
	case modeFail:
		c.exitCode = 1
	case modeCrash:
		c.exitCode = 2
	case modeLinger, modeHang:
		c.delay = time.Hour
	default:
		return c, fmt.Errorf("unknown mode %q", c.mode)
	}
	if c.mode == modeSlow {
		c.delay = 500 * time.Millisecond
	}
	if s := os.Getenv("MOCKAGENT_DELAY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return c, fmt.Errorf("MOCKAGENT_DELAY=%q is not a duration", s)
		}
		c.delay = d
	}
	if s := os.Getenv("MOCKAGENT_BYTES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return c, fmt.Errorf("MOCKAGENT_BYTES=%q is not a byte count", s)
		}
		c.bytes = n
	}
	if s := os.Getenv("MOCKAGENT_STDERR_LINES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return c, fmt.Errorf("MOCKAGENT_STDERR_LINES=%q is not a line count", s)
		}
		c.stderrLines = n
	}
	if s := os.Getenv("MOCKAGENT_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return c, fmt.Errorf("MOCKAGENT_STEPS=%q is not a line count", s)
		}
		c.steps = n
	}
	if s := os.Getenv("MOCKAGENT_EXIT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return c, fmt.Errorf("MOCKAGENT_EXIT=%q is not an exit code", s)
		}
		c.exitCode = n
	}
	switch {
	case inv.resume != "" && !inv.fork:
		c.session = inv.resume
	case inv.pin != "":
		c.session = inv.pin
	}
	return c, nil
}

// usage is the token counts a result reports.
type usage struct {
	in, out, cacheRead, cacheWrite int
	cost                           float64
}

// emitter renders the events of a run in one vendor's line format. A method
// returns nil for an event the vendor does not print on its own line.
type emitter interface {
	newSession() string
	start(session, model, prompt string) []any
	text(s string) any
	toolCall(id, name string, input map[string]any) any
	toolResult(id, name string, input map[string]any, output string, isError bool) any
	result(isError bool, text string, u usage, turns int) []any
}

func newEmitter(vendor string) emitter {
	switch vendor {
	case "codex":
		return &codexEmitter{}
	case "gemini":
		return &geminiEmitter{}
	case "opencode":
		return &openCodeEmitter{}
	default:
		return &claudeEmitter{}
	}
}

// player writes lines, flushing each as a real CLI does.
type player struct {
	w     *bufio.Writer
	delay time.Duration
	err   error
}

func (p *player) line(v any) {
	if v == nil || p.err != nil {
		return
	}
	var b []byte
	if raw, ok := v.(rawLine); ok {
		b = []byte(raw)
	} else if b, p.err = json.Marshal(v); p.err != nil {
		return
	}
	b = append(b, '\n')
	if _, p.err = p.w.Write(b); p.err == nil {
		p.err = p.w.Flush()
	}
	if p.delay > 0 {
		time.Sleep(p.delay)
	}
}

func (p *player) lines(vs []any) {
	for _, v := range vs {
		p.line(v)
	}
}

// rawLine is printed as is: the malformed mode's non-JSON lines.
type rawLine string

// play prints the run for the mode and returns the exit code.
func play(e emitter, inv invocation, c config, out, errOut io.Writer) int {
	p := &player{w: bufio.NewWriterSize(out, 64<<10)}
	if c.stderrLines > 0 {
		// Concurrently, as a real CLI's logger would; the mock does not exit
		// before its reader took every line, so a reader that drains only
		// stdout sees the mock hang, as it would a real CLI.
		stderrDone := make(chan struct{})
		defer func() { <-stderrDone }()
		go func() {
			defer close(stderrDone)
			for i := 1; i <= c.stderrLines; i++ {
				fmt.Fprintf(errOut, "mockagent: diagnostic line %d of %d\n", i, c.stderrLines)
			}
		}()
	}
	if c.mode == modeSlow {
		p.delay = c.delay
	}
	session := c.session
	if session == "" {
		session = e.newSession()
	}
	p.lines(e.start(session, inv.model, inv.prompt))
	if inv.prompt == "" {
		// A resumed session with nothing to ask: report it and stop.
		p.line(e.text("Resumed session " + session))
		p.lines(e.result(false, "Resumed session "+session, usage{}, 0))
		return done(p, 0)
	}
	switch c.mode {
	case modeFail:
		p.line(e.text("Starting on the task."))
		p.lines(e.result(true, "mock failure requested", usage{in: 12, out: 3, cost: 0.0004}, 1))
		return done(p, c.exitCode)
	case modeCrash:
		p.line(e.text("Starting on the task."))
		p.line(e.toolCall("call_1", "Bash", map[string]any{"command": "make build"}))
		return done(p, c.exitCode)
	case modeHang:
		// No terminal event ever: only a deadline or a signal ends this.
		p.line(e.text("Thinking very hard."))
		_ = p.w.Flush()
		time.Sleep(c.delay)
		return done(p, 0)
	case modeSnoop:
		p.line(e.text("Looking for what my supervisor holds."))
		snoop(p, e)
		p.line(e.text("Done."))
		p.lines(e.result(false, "Done.", usage{in: 40, out: 12, cost: 0.0003}, 1))
		return done(p, 0)
	case modeMalformed:
		p.line(rawLine("mockagent: this line is not JSON"))
		p.line(rawLine(`{"type":"assistant","message":{"content":[{"type":"te`))
	case modeBig:
		chunk := strings.Repeat("All work and no play makes a big transcript. ", 1400) // ~63 KiB
		for n := 0; n < c.bytes && p.err == nil; n += len(chunk) {
			p.line(e.text(chunk))
		}
	}
	for i := 1; i <= c.steps && p.err == nil; i++ {
		p.line(e.text(fmt.Sprintf("Step %d of %d.", i, c.steps)))
	}
	p.line(e.text("Working on: " + head(inv.prompt, 80)))
	in := map[string]any{"command": "echo hello"}
	p.line(e.toolCall("call_1", "Bash", in))
	p.line(e.toolResult("call_1", "Bash", in, "hello\n", false))
	in2 := map[string]any{"file_path": "/workspace/missing.txt"}
	p.line(e.toolCall("call_2", "Read", in2))
	p.line(e.toolResult("call_2", "Read", in2, "File does not exist.", true))
	p.line(e.text("Done."))
	p.lines(e.result(false, "Done.", usage{in: 1200, out: 340, cacheRead: 5000, cacheWrite: 800, cost: 0.0123}, 3))
	if c.mode == modeLinger {
		_ = p.w.Flush()
		time.Sleep(c.delay)
	}
	return done(p, 0)
}

// done returns the exit code, turning a success into 1 when stdout broke
// (possible when SIGPIPE is ignored; otherwise the signal ends the mock).
func done(p *player, code int) int {
	if p.err == nil {
		p.err = p.w.Flush()
	}
	if p.err != nil {
		fmt.Fprintf(os.Stderr, "mockagent: writing events: %v\n", p.err)
		if code == 0 {
			return 1
		}
	}
	return code
}

// head returns at most n bytes of s, cut at a character boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func itoa(n int) string { return strconv.Itoa(n) }
