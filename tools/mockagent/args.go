package main

import (
	"errors"
	"fmt"
	"strings"
)

// invocation is what the mock understood of its command line.
type invocation struct {
	prompt string
	model  string
	// resume is the session being continued; pin a caller-chosen new id.
	resume string
	pin    string
	fork   bool
	flags  map[string]string
}

// valueFlags are, per vendor, the flags that take a value; any other dash
// argument is a switch. Unknown flags are accepted like switches so that a
// newer argv does not break the mock.
var valueFlags = map[string][]string{
	"claude": {"--output-format", "--input-format", "--model", "--allowedTools", "--disallowedTools",
		"--mcp-config", "--settings", "--max-turns", "--resume", "-r", "--session-id", "--permission-mode"},
	"codex":    {"--model", "-m", "--sandbox", "-s", "-c", "--config", "--output-schema", "-o", "--output-last-message", "-C", "--cd"},
	"gemini":   {"--output-format", "-o", "--model", "-m", "--approval-mode", "--allowed-tools", "--resume", "-r", "--session-id", "--prompt", "-p"},
	"opencode": {"--format", "--model", "-m", "--session", "-s", "--agent"},
}

// parseArgs reads a vendor command line the way that CLI would, and checks
// the flags the real CLI insists on, so a wrong argv fails here as it would
// in production.
func parseArgs(vendor string, args []string) (invocation, error) {
	inv := invocation{flags: map[string]string{}}
	var pos []string
	takes := map[string]bool{}
	for _, f := range valueFlags[vendor] {
		takes[f] = true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && strings.Contains(a, "=") && strings.HasPrefix(a, "--"):
			k, v, _ := strings.Cut(a, "=")
			inv.flags[k] = v
		case takes[a]:
			if i+1 >= len(args) {
				return inv, fmt.Errorf("option %s needs a value", a)
			}
			inv.flags[a] = args[i+1]
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1:
			inv.flags[a] = "true"
		default:
			pos = append(pos, a)
		}
	}
	inv.model = first(inv.flags, "--model", "-m")
	var err error
	switch vendor {
	case "claude":
		err = claudeArgs(&inv, pos)
	case "codex":
		err = codexArgs(&inv, pos)
	case "gemini":
		err = geminiArgs(&inv, pos)
	case "opencode":
		err = openCodeArgs(&inv, pos)
	}
	if err == nil && inv.prompt == "" && inv.resume == "" {
		err = errors.New("no prompt given (pass one as an argument)")
	}
	return inv, err
}

func claudeArgs(inv *invocation, pos []string) error {
	if inv.flags["--print"] == "" && inv.flags["-p"] == "" {
		return errors.New("only --print mode is supported by the mock")
	}
	if inv.flags["--output-format"] != "stream-json" {
		return errors.New("--output-format stream-json is required")
	}
	if inv.flags["--verbose"] == "" {
		return errors.New("when using --print, --output-format=stream-json requires --verbose")
	}
	inv.resume = first(inv.flags, "--resume", "-r")
	inv.pin = inv.flags["--session-id"]
	inv.fork = inv.flags["--fork-session"] != ""
	if inv.resume != "" && inv.pin != "" && !inv.fork {
		return errors.New("--session-id can only be used with --resume if --fork-session is also specified")
	}
	inv.prompt = strings.Join(pos, " ")
	return nil
}

func codexArgs(inv *invocation, pos []string) error {
	if len(pos) == 0 || pos[0] != "exec" {
		return errors.New("the mock only supports `codex exec`")
	}
	pos = pos[1:]
	if inv.flags["--json"] == "" && inv.flags["--experimental-json"] == "" {
		return errors.New("--json is required")
	}
	if len(pos) > 0 && pos[0] == "resume" {
		if len(pos) < 2 {
			return errors.New("resume needs a session id")
		}
		inv.resume, pos = pos[1], pos[2:]
	}
	inv.prompt = strings.Join(pos, " ")
	return nil
}

func geminiArgs(inv *invocation, pos []string) error {
	if first(inv.flags, "--output-format", "-o") != "stream-json" {
		return errors.New("--output-format stream-json is required")
	}
	inv.resume = first(inv.flags, "--resume", "-r")
	inv.pin = inv.flags["--session-id"]
	inv.prompt = first(inv.flags, "--prompt", "-p")
	if inv.prompt == "" {
		inv.prompt = strings.Join(pos, " ")
	}
	return nil
}

func openCodeArgs(inv *invocation, pos []string) error {
	if len(pos) == 0 || pos[0] != "run" {
		return errors.New("the mock only supports `opencode run`")
	}
	if inv.flags["--format"] != "json" {
		return errors.New("--format json is required")
	}
	inv.resume = first(inv.flags, "--session", "-s")
	inv.prompt = strings.Join(pos[1:], " ")
	return nil
}

// first returns the value of the first of the flags that is set.
func first(flags map[string]string, names ...string) string {
	for _, n := range names {
		if v := flags[n]; v != "" {
			return v
		}
	}
	return ""
}
