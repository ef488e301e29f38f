package decision

import (
	"errors"
	"strings"
	"testing"
)

func TestParseInitFailure(t *testing.T) {
	const withMessage = `{"kind":"lifecycle","phase":"init","status":"failed","reason":"clone","exitCode":14,"message":"clone app: git clone exited 128: fatal: not found"}`
	cases := []struct {
		rule          string
		log           string
		step, message string
		ok            bool
	}{
		{"a failed line names the step and its message",
			lines(initStarted, `{"kind":"lifecycle","phase":"init","status":"running","tool":"git"}`,
				`{"time":"2026-11-29T12:00:00Z","level":"ERROR","msg":"init failed","reason":"clone","exit_code":14,"err":"x"}`, withMessage),
			"clone", "clone app: git clone exited 128: fatal: not found", true},
		{"a failed line of supervisors before the message names the step only", lines(initStarted, initFailed), "config", "", true},
		{"the run-event envelope is read too",
			lines(`{"id":"u-1","sequence":"3","kind":"EVENT_KIND_LIFECYCLE","lifecycle":{"phase":"init","status":"failed","reason":"home","exitCode":12,"message":"m"}}`),
			"home", "m", true},
		{"the last failed line wins", lines(initFailed, withMessage), "clone", "clone app: git clone exited 128: fatal: not found", true},
		{"an init that succeeded tells no failure", lines(initStarted, initConv, initSucceeded), "", "", false},
		{"another phase's failure is not the init's",
			lines(`{"kind":"lifecycle","phase":"agent","status":"failed","reason":"exit-code","exitCode":3}`), "", "", false},
		{"an empty log tells nothing", "", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			step, message, ok := ParseInitFailure(c.log)
			if step != c.step || message != c.message || ok != c.ok {
				t.Fatalf("got %q %q %v, want %q %q %v", step, message, ok, c.step, c.message, c.ok)
			}
		})
	}
}

func TestInitFailureReason(t *testing.T) {
	cases := []struct {
		rule string
		f    InitFailure
		want string
	}{
		{"the step, the exit code and the message", InitFailure{Container: "init", ExitCode: 14, Step: "clone", Message: "clone app: failed"},
			"init step clone failed (exit 14): clone app: failed"},
		{"the step and the exit code when the line has no message", InitFailure{Container: "init", ExitCode: 16, Step: "config"},
			"init step config failed (exit 16)"},
		{"the message is made one line", InitFailure{ExitCode: 14, Step: "clone", Message: "a\n  b\tc"},
			"init step clone failed (exit 14): a b c"},
		{"every url's userinfo is redacted", InitFailure{ExitCode: 14, Step: "clone", Message: "https://u:p@a/x and ssh://git:pw@b:22/y"},
			"init step clone failed (exit 14): https://<redacted>@a/x and ssh://<redacted>@b:22/y"},
		{"without a line: the container and its exit code; the kubelet's plain Error is left out",
			InitFailure{Container: "init", ExitCode: 2, Reason: "Error"}, `init container "init" failed (exit 2)`},
		{"without a line: a telling kubelet reason is kept", InitFailure{Container: "init", ExitCode: 137, Reason: "OOMKilled"},
			`init container "init" failed (exit 137, OOMKilled)`},
		{"an unreadable log says so", InitFailure{Container: "init", ExitCode: 14, LogErr: errors.New("no kubelet")},
			`init container "init" failed (exit 14); its log could not be read: no kubelet`},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := InitFailureReason(&c.f); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	long := InitFailureReason(&InitFailure{ExitCode: 14, Step: "clone", Message: strings.Repeat("é", 2000)})
	if len(long) > maxInitMessage+len("init step clone failed (exit 14): ") {
		t.Fatalf("a long message makes a %d-byte reason", len(long))
	}
}
