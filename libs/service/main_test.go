package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// testConfig is a service Config: it embeds Options.
type testConfig struct {
	Options
	Name string
}

func newTestFlagSet(getenv func(string) string) (*FlagSet, *testConfig) {
	fs := NewFlagSet("svc", getenv)
	c := &testConfig{}
	fs.AddServing(&c.Options, ServingDefaults{})
	fs.StringVar(&c.Name, "name", "", "a setting of the service's own")
	return fs, c
}

func parseTest(args []string, getenv func(string) string, out io.Writer) (*testConfig, error) {
	return ParseConfig(newTestFlagSet, args, getenv, out)
}

// mainCode turns each way a service ends into its exit code and the
// lines main owes the operator.
func TestMainCodeExitsAsEveryServiceDoes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		parse      ParseFunc[*testConfig]
		runErr     error
		code       int
		ran        bool
		stdout     string
		stderr     string
		noStderrOf string
	}{
		{name: "runs until run returns", args: []string{"--name=x"}, code: 0, ran: true, noStderrOf: "stopped"},
		{name: "version is printed and stops", args: []string{"--version"}, code: 0, stdout: "svc"},
		{name: "help is printed and stops", args: []string{"--help"}, code: 0, stdout: "--name"},
		{name: "a bad flag is refused", args: []string{"--nope"}, code: 2, stderr: "svc: "},
		{name: "a bad log level is refused", code: 2, stderr: "svc: --log-level / LOG_LEVEL: unknown log level",
			parse: func([]string, func(string) string, io.Writer) (*testConfig, error) {
				return &testConfig{Options: Options{LogLevel: "loud"}}, nil
			}},
		{name: "a failed run is logged and exits 1", args: []string{"--name=x"}, runErr: errors.New("boom"), code: 1, ran: true,
			stderr: `"msg":"svc stopped","service":"svc","err":"boom"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parse := tc.parse
			if parse == nil {
				parse = parseTest
			}
			ran := false
			run := func(ctx context.Context, cfg *testConfig, log *slog.Logger) error {
				ran = true
				if cfg.Name != "x" || log == nil || ctx.Err() != nil {
					t.Errorf("run got name %q, logger %v, ctx err %v", cfg.Name, log, ctx.Err())
				}
				return tc.runErr
			}
			var stdout, stderr bytes.Buffer
			code := mainCode("svc", parse, run, tc.args, func(string) string { return "" }, &stdout, &stderr)
			if code != tc.code || ran != tc.ran {
				t.Fatalf("code %d, ran %v; want %d, %v (stderr %q)", code, ran, tc.code, tc.ran, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderr)
			}
			if tc.noStderrOf != "" && strings.Contains(stderr.String(), tc.noStderrOf) {
				t.Errorf("stderr %q has %q", stderr.String(), tc.noStderrOf)
			}
		})
	}
}

func TestParseExitSaysWhetherAndHowToExit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		done   bool
		stderr string
	}{
		{"parsed", nil, 0, false, ""},
		{"version", ErrVersion, 0, true, ""},
		{"help", ErrHelp, 0, true, ""},
		{"bad flag", errors.New("--x: bad"), 2, true, "svc run: --x: bad\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code, done := ParseExit(tc.err, "svc run", &stderr)
			if code != tc.code || done != tc.done || stderr.String() != tc.stderr {
				t.Fatalf("ParseExit = %d, %v, stderr %q; want %d, %v, %q", code, done, stderr.String(), tc.code, tc.done, tc.stderr)
			}
		})
	}
}
