package run

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"

	"github.com/agentplane/agentplane/libs/vendors"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
)

// MaxLine is the longest CLI line that is parsed (16 MiB). A longer line is
// still echoed to stdout, byte for byte, but not buffered whole: it becomes
// no event and is counted.
const MaxLine = 16 << 20

// readBuffer is the pipe read size; lines longer than it are assembled.
const readBuffer = 64 << 10

// pipeline turns the CLI's stdout into the log tail and the event stream.
// It runs on one goroutine, so events are stamped in line order.
type pipeline struct {
	em     *emit.Emitter
	parser vendors.Parser
	log    *slog.Logger
	// result receives the first result event's is_error, once.
	result chan bool
	gotRes bool
	// tap, when set, also receives every stamped CLI event: a realtime
	// turn streams them to its caller. It must not block.
	tap func(*eventsv1.RunEvent)

	lines, malformed, oversized, events uint64
}

func newPipeline(em *emit.Emitter, v vendors.Vendor, log *slog.Logger) *pipeline {
	return &pipeline{em: em, parser: v.NewParser(), log: log, result: make(chan bool, 1)}
}

// lineWriter sends echoed bytes through the Emitter, which serialises them
// with the lifecycle lines.
type lineWriter struct{ em *emit.Emitter }

func (w lineWriter) Write(b []byte) (int, error) {
	if err := w.em.WriteLine(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// consume reads r until EOF or a read error. Output is echoed as it is
// read and flushed whenever the pipe has nothing more buffered, so the
// log tail is current without a write per line under load. The CLI is
// only ever slowed by stdout itself, never by sinks or NATS.
func (p *pipeline) consume(r io.Reader) {
	br := bufio.NewReaderSize(r, readBuffer)
	out := bufio.NewWriterSize(lineWriter{p.em}, readBuffer)
	var long []byte
	tooLong := false
	echoErr := false
	echo := func(b []byte) {
		if _, err := out.Write(b); err != nil && !echoErr {
			echoErr = true
			p.log.Warn("writing CLI output to stdout", "err", err)
		}
	}
	for {
		chunk, err := br.ReadSlice('\n')
		echo(chunk)
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong && len(long)+len(chunk) <= MaxLine {
				long = append(long, chunk...)
			} else if !tooLong {
				tooLong, long = true, long[:0]
			}
			continue
		}
		line := chunk
		if len(long) > 0 || tooLong {
			long = append(long, chunk...)
			line = long
		}
		if err != nil && len(line) > 0 {
			echo([]byte{'\n'}) // a last line without newline still ends one
		}
		if tooLong {
			p.oversized++
			if p.oversized == 1 {
				p.log.Warn("CLI line longer than the parse limit; echoed but not parsed", "limit", MaxLine)
			}
		} else if len(line) > 0 {
			p.handle(bytes.TrimSuffix(line, []byte{'\n'}))
		}
		long, tooLong = long[:0], false
		if br.Buffered() == 0 || err != nil {
			_ = out.Flush() // errors were reported through echo's writer
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.log.Debug("CLI stdout closed", "err", err)
			}
			_ = out.Flush()
			return
		}
	}
}

// handle parses one line and delivers its events. A malformed line is
// counted and delivered as a raw event; it never ends the run.
func (p *pipeline) handle(line []byte) {
	p.lines++
	evs, err := p.parser.Parse(line)
	if err != nil {
		p.malformed++
		if p.malformed == 1 {
			// The error names the problem, not the line's content.
			p.log.Warn("CLI printed a line that is not a valid event; kept as raw", "err", err)
		}
	}
	stamped := make([]*eventsv1.RunEvent, 0, len(evs))
	for i := range evs {
		ev := evs[i].Proto()
		if i == 0 {
			// One copy of the vendor's line per line, on its first event.
			ev.Raw = bytes.Clone(line)
		}
		if evs[i].Kind == vendors.KindResult && !p.gotRes {
			p.gotRes = true
			p.result <- evs[i].IsError
		}
		stamped = append(stamped, p.em.Run().Stamp(ev))
	}
	if len(stamped) > 0 {
		p.em.DeliverLine(stamped[0].GetRaw(), stamped)
	}
	for _, ev := range stamped {
		if p.tap != nil {
			p.tap(ev)
		}
		p.events++
	}
}

// forwardStderr copies the CLI's stderr to w line by line, each prefixed
// "[agent] " so it is never mistaken for the supervisor's own JSON logs.
func forwardStderr(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, readBuffer)
	start := true
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			buf := make([]byte, 0, len(chunk)+9)
			if start {
				buf = append(buf, "[agent] "...)
			}
			buf = append(buf, chunk...)
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) && buf[len(buf)-1] != '\n' {
				buf = append(buf, '\n')
			}
			_, _ = w.Write(buf)
			start = chunk[len(chunk)-1] == '\n'
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
