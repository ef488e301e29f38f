package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// claudeProjects is where Claude Code keeps its sessions, relative to HOME.
const claudeProjects = ".claude/projects"

// notAlnum is what Claude Code replaces with "-" to name a working
// directory's project dir ("/workspace" is "-workspace").
var notAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// recordClaudeSession keeps a transcript as Claude Code does: one JSON
// line per prompt appended to
// $HOME/.claude/projects/<project>/<session>.jsonl, <project> naming the
// working directory. A fork (--resume X --fork-session) starts the new
// session's file with a copy of X's, wherever under the projects X is. It
// does nothing without HOME; a resume without a prompt writes nothing.
func recordClaudeSession(inv invocation, session string) error {
	home := os.Getenv("HOME")
	if home == "" || session == "" {
		return nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	dir := filepath.Join(home, filepath.FromSlash(claudeProjects), notAlnum.ReplaceAllString(cwd, "-"))
	file := filepath.Join(dir, session+".jsonl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if inv.fork && inv.resume != "" && inv.resume != session {
		if from := findClaudeSession(home, dir, inv.resume); from != "" {
			b, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			if err := os.WriteFile(file, b, 0o600); err != nil {
				return err
			}
		}
	}
	if inv.prompt == "" {
		return nil
	}
	line, err := json.Marshal(o("type", "user", "sessionId", session, "cwd", cwd, "uuid", newUUID(),
		"timestamp", time.Now().UTC().Format(time.RFC3339Nano), "message", o("role", "user", "content", inv.prompt)))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// findClaudeSession is the transcript of session: in the working
// directory's project first, else in any project; "" when there is none.
func findClaudeSession(home, dir, session string) string {
	if strings.ContainsAny(session, `/\*?[`) {
		return ""
	}
	if p := filepath.Join(dir, session+".jsonl"); isFile(p) {
		return p
	}
	matches, _ := filepath.Glob(filepath.Join(home, filepath.FromSlash(claudeProjects), "*", session+".jsonl"))
	for _, p := range matches {
		if isFile(p) {
			return p
		}
	}
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
