// Package watch reads the recipe's output.watch files (AGENT_WATCH) after
// the CLI exited and turns each into a file event, so a run can hand back
// a report or a patch without a sink of its own.
package watch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentplane/agentplane/libs/runspec"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// MaxBytes caps a watched file's content (128 KiB, docs/events.md);
// a larger file is reported with reason "too-large" and no content.
const MaxBytes = 128 << 10

// Reasons a file event carries instead of content.
const (
	ReasonMissing    = "missing"
	ReasonTooLarge   = "too-large"
	ReasonUnreadable = "unreadable"
)

// Entry is one output.watch entry.
type Entry struct {
	Event string `json:"event"`
	Path  string `json:"path"`
}

// Parse reads AGENT_WATCH; empty input is no entries. Entries without an
// event or a path are dropped.
func Parse(data string) ([]Entry, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var raw []Entry
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", runspec.EnvWatch, err)
	}
	out := raw[:0]
	for _, e := range raw {
		if e.Event != "" && e.Path != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// ErrOutside is returned for a path that is not strictly below the
// workspace; such an entry produces no event (a recipe bug must not leak
// files from elsewhere in the pod).
var ErrOutside = errors.New("path is not inside the workspace")

// Collect returns the file event of e. A path is resolved against
// workspace when relative; after following symlinks it must still lie
// strictly below the (symlink-resolved) workspace, else ErrOutside.
func Collect(workspace string, e Entry) (*eventsv1.FileEvent, error) {
	root, err := filepath.Abs(workspace)
	if err != nil || root == "/" {
		return nil, fmt.Errorf("workspace %q: %w", workspace, ErrOutside)
	}
	p := e.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !below(root, p) {
		return nil, fmt.Errorf("%s: %w", e.Path, ErrOutside)
	}
	fe := &eventsv1.FileEvent{Event: e.Event, Path: p}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		fe.Reason = ReasonMissing
		return fe, nil
	}
	if err != nil {
		// Not a failure of Collect: the event still goes out, its reason
		// telling the consumer the file could not be read.
		fe.Reason = ReasonUnreadable
		return fe, nil //nolint:nilerr // the error is reported as the event's reason
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		realRoot = root
	}
	if !below(realRoot, real) {
		// A symlink inside the workspace that points out of it.
		return nil, fmt.Errorf("%s: %w", e.Path, ErrOutside)
	}
	fe.Content, fe.Reason = read(real)
	return fe, nil
}

// read returns the file's text (invalid UTF-8 replaced, since the event is
// JSON text) or the reason it has none.
func read(p string) (string, string) {
	f, err := os.Open(p)
	if err != nil {
		return "", ReasonUnreadable
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return "", ReasonUnreadable
	}
	if !fi.Mode().IsRegular() {
		return "", ReasonMissing
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return "", ReasonUnreadable
	}
	if len(b) > MaxBytes {
		return "", ReasonTooLarge
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), ""
}

// below reports whether p is strictly inside root.
func below(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
