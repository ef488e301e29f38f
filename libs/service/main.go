package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Configured is a service's parsed configuration. Every service Config
// embeds Options, which gives it ServiceOptions.
type Configured interface {
	ServiceOptions() *Options
}

// ServiceOptions returns o, so that a Config embedding Options is
// Configured.
func (o *Options) ServiceOptions() *Options { return o }

// ParseFunc reads a service's configuration from args (without the
// program name), then getenv for each flag not given, printing --version
// and --help to out; config packages export one as Parse.
type ParseFunc[C any] func(args []string, getenv func(string) string, out io.Writer) (C, error)

// RunFunc runs a service until ctx is cancelled or it fails.
type RunFunc[C any] func(ctx context.Context, cfg C, log *slog.Logger) error

// Main is the main function of a long-running service named name: it
// parses the command line and environment with parse, builds the JSON
// logger at the configured level, sets the Go runtime's memory limit from
// the container's (LimitMemory), and runs run until SIGTERM or SIGINT.
// It exits 0 after --version or --help; 2 on a bad flag, variable or log
// level, with the error on stderr; 1 when run fails, after logging
// "<name> stopped".
func Main[C Configured](name string, parse ParseFunc[C], run RunFunc[C]) {
	os.Exit(mainCode(name, parse, run, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// mainCode is Main without the process: it returns the exit code. Being
// apart from Main also releases the signal handler (by the deferred stop)
// before Main calls os.Exit, which skips deferred calls.
func mainCode[C Configured](name string, parse ParseFunc[C], run RunFunc[C],
	args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, getenv, stdout)
	if code, done := ParseExit(err, name, stderr); done {
		return code
	}
	log, err := NewLogger(name, cfg.ServiceOptions().LogLevel, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: --log-level / LOG_LEVEL: %v\n", name, err)
		return 2
	}
	LimitMemory(log)
	ctx, stop := SignalContext()
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error(name+" stopped", "err", err)
		return 1
	}
	return 0
}

// ParseExit tells main what the error of a Parse means. done is false
// when err is nil: the process goes on. Otherwise it should exit with
// code: 0 after --version or --help, 2 for a bad flag or variable, whose
// error ParseExit writes to stderr after prefix.
func ParseExit(err error, prefix string, stderr io.Writer) (code int, done bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, ErrVersion), errors.Is(err, ErrHelp):
		return 0, true
	default:
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 2, true
	}
}

// ParseConfig is the Parse of a config package: it builds the FlagSet
// and the configuration it fills with newFlagSet, then parses args and
// getenv. After --version or --help, which it prints to out, it returns
// ErrVersion or ErrHelp.
func ParseConfig[C any](newFlagSet func(getenv func(string) string) (*FlagSet, C),
	args []string, getenv func(string) string, out io.Writer) (C, error) {
	fs, c := newFlagSet(getenv)
	if err := fs.Parse(args, out); err != nil {
		var zero C
		return zero, err
	}
	return c, nil
}
