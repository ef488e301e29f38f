// Package initstep is `supervisor init`, the run pod's init container: it
// prepares the shared volumes before the agent container starts. Every
// failure has its own exit code and lifecycle reason, so a failed pod
// says which step broke.
package initstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/safeurl"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/truncate"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/cli"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
	"github.com/agentplane/agentplane/services/supervisor/internal/repos"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// Exit codes of `supervisor init`, one per step that can fail. Skills,
// settings and the conversation restore are best-effort and never fail the
// pod over what a remote store serves.
const (
	ExitBundle       = 10 // copying the supervisor into the agent volume
	ExitSpec         = 11 // AGENT_RUN_SPEC missing or unusable
	ExitHome         = 12 // HOME cannot be created or written
	ExitRepos        = 13 // AGENT_REPOS does not parse
	ExitClone        = 14 // a clone or checkout failed
	ExitConversation = 15 // the vendor's state dir or the skip marker could not be written
	ExitConfig       = 16 // the vendor's config files could not be written
	ExitChown        = 17 // handing the volumes to the agent's user failed
)

// Options configures Main.
type Options struct {
	Env runenv.Env
	// AgentDir is the agent volume (/agent).
	AgentDir string
	// Chown is "uid:gid" to hand the volumes to after provisioning, when
	// running as root; empty skips it.
	Chown string
	// TerminationLog receives the init's delivery summary (emit.Options).
	TerminationLog string
	Stdout         io.Writer
	Stderr         io.Writer
	Logger         *slog.Logger
}

// failure is a step's error with its exit code and reason.
type failure struct {
	code   int
	reason string
	err    error
}

func (f *failure) Error() string { return f.reason + ": " + f.err.Error() }

func fail(code int, reason string, err error) *failure {
	return &failure{code: code, reason: reason, err: err}
}

// Main runs every step and returns the exit code.
func Main(ctx context.Context, opts Options) int {
	started := time.Now()
	log := opts.Logger
	plan, specErr := cli.Load(opts.Env)
	vendor := ""
	if specErr == nil {
		vendor = plan.Vendor.Name()
	}
	em := emit.New(emit.Options{Env: opts.Env, Vendor: vendor, Stdout: opts.Stdout, TerminationLog: opts.TerminationLog, Logger: log})
	em.Lifecycle("init", "started", "", nil, "")
	s := &steps{opts: opts, log: log, em: em, plan: plan}
	var f *failure
	switch {
	case specErr != nil:
		f = fail(ExitSpec, "spec", specErr)
	default:
		f = s.all(ctx)
	}
	seqFile := filepath.Join(opts.AgentDir, emit.SequenceFile)
	if f != nil {
		code := int32(f.code)
		fmt.Fprintf(opts.Stderr, "supervisor init: %v\n", f)
		log.Error("init failed", "reason", f.reason, "exit_code", f.code, "err", f.err)
		// The message lets the controller say on the Agent which step
		// broke and why, rather than the Job's generic backoff reason.
		em.Event(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
			Phase: "init", Status: "failed", Reason: f.reason, ExitCode: &code, Message: failureMessage(f.err)}}})
	} else {
		em.Lifecycle("init", "succeeded", "", nil, "")
	}
	if err := emit.WriteStarted(filepath.Join(opts.AgentDir, emit.StartedFile), started); err != nil {
		log.Warn("the run's deadline will count from the agent container's start", "err", err)
	}
	// The flush runs even when ctx is cancelled (SIGTERM): the events say
	// how init ended. emitFlush bounds it instead.
	if err := em.Close(emitFlush, seqFile); err != nil { //nolint:contextcheck // must outlive ctx to flush the final events; bounded by emitFlush
		log.Warn("not every init event was delivered", "err", err)
	}
	if f != nil {
		return f.code
	}
	// The state files are written as root; the agent only reads them.
	return 0
}

type steps struct {
	opts Options
	log  *slog.Logger
	em   *emit.Emitter
	plan *cli.Plan
}

func (s *steps) all(ctx context.Context) *failure {
	for _, step := range []struct {
		tool string
		fn   func(context.Context) *failure
	}{
		{"bundle", s.bundle},
		{"home", s.home},
		{"git", s.repos},
		{"skills", s.skills},
		{"conversation", s.conversation},
		{"config", s.config},
		{"chown", s.chown},
	} {
		s.em.Lifecycle("init", "running", "", nil, step.tool)
		if f := step.fn(ctx); f != nil {
			return f
		}
	}
	return nil
}

// bundle copies this binary to <agent>/bin/supervisor through a temporary
// file and a rename, so a half-written copy is never executed.
func (s *steps) bundle(context.Context) *failure {
	self, err := os.Executable()
	if err != nil {
		return fail(ExitBundle, "bundle", fmt.Errorf("find own executable: %w", err))
	}
	dst := filepath.Join(s.opts.AgentDir, runspec.BundlePath)
	if err := copyExecutable(self, dst); err != nil {
		return fail(ExitBundle, "bundle", err)
	}
	if err := copyBundleDir(filepath.Join(filepath.Dir(self), BundleDir), filepath.Dir(dst)); err != nil {
		return fail(ExitBundle, "bundle", err)
	}
	return nil
}

// BundleDir is the directory beside the supervisor binary (in its image) that holds further tools
// for the run (for example the vendor CLIs); init copies its entries into
// <agent>/bin, which is first on the agent's PATH. A missing directory is
// an empty bundle.
const BundleDir = "bundle"

// copyBundleDir copies the files of src into dst. A symlink to another
// entry of src stays a link (so one binary can answer to several names, as
// the mock CLIs do); any other symlink is copied as the file it points to.
func copyBundleDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read bundle %s: %w", src, err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				return fmt.Errorf("read link %s: %w", from, err)
			}
			if fi, err := os.Lstat(filepath.Join(src, filepath.Base(target))); err == nil && fi.Mode().IsRegular() {
				_ = os.Remove(to)
				if err := os.Symlink(filepath.Base(target), to); err != nil {
					return fmt.Errorf("link %s: %w", to, err)
				}
				continue
			}
		} else if !e.Type().IsRegular() {
			continue
		}
		if err := copyExecutable(from, to); err != nil {
			return err
		}
	}
	return nil
}

func copyExecutable(src, dst string) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".supervisor-*")
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return nil
}

func (s *steps) home(context.Context) *failure {
	h := s.opts.Env.Home
	if err := os.MkdirAll(h, 0o755); err != nil {
		return fail(ExitHome, "home", fmt.Errorf("create HOME %s: %w", h, err))
	}
	probe, err := os.CreateTemp(h, ".probe-*")
	if err != nil {
		return fail(ExitHome, "home", fmt.Errorf("HOME %s is not writable: %w", h, err))
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name())
	return nil
}

func (s *steps) repos(ctx context.Context) *failure {
	list, err := repos.Parse(s.opts.Env.ReposJSON)
	if err != nil {
		return fail(ExitRepos, "repos", err)
	}
	if len(list) == 0 {
		return nil
	}
	env := append(os.Environ(), repos.AliasEnv(list, s.opts.Env.Getenv)...)
	c := &repos.Cloner{Helper: filepath.Join(s.opts.AgentDir, runspec.BundlePath), Env: env, Log: s.log}
	for _, r := range list {
		dest, err := repos.Dest(s.opts.Env.Workspace, r)
		if err != nil {
			// A recipe bug, not an attack on this pod: skip the repo.
			s.log.Warn("repo skipped", "repo", r.Name, "err", err)
			continue
		}
		if err := c.Clone(ctx, r, dest); err != nil {
			return fail(ExitClone, "clone", err)
		}
	}
	return nil
}

// skills stages settings.json and the named skill archives from
// skills_source. Best-effort: a missing skill degrades the agent, it does
// not stop the run.
func (s *steps) skills(ctx context.Context) *failure {
	src := s.opts.Env.SkillsSource
	if src == "" {
		return nil
	}
	home := s.opts.Env.Home
	if err := get(ctx, src, "settings.json", nil, func(r io.Reader) error {
		return writeFile(filepath.Join(home, cli.SettingsFile), r, maxSettingsBytes)
	}); err != nil {
		s.log.Warn("settings not staged", "err", err)
	}
	var names []string
	if strings.TrimSpace(s.opts.Env.SkillsJSON) != "" {
		if err := json.Unmarshal([]byte(s.opts.Env.SkillsJSON), &names); err != nil {
			s.log.Warn(runspec.EnvSkills+" does not parse; no skills staged", "err", err)
		}
	}
	dir := filepath.Join(home, ".claude", "skills")
	for _, n := range names {
		if !skillName.MatchString(n) {
			s.log.Warn("skill name refused", "skill", n)
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			s.log.Warn("skills dir", "err", err)
			return nil
		}
		if err := get(ctx, src, n+".tar.gz", nil, func(r io.Reader) error { return extract(r, dir, "") }); err != nil {
			s.log.Warn("skill not staged", "skill", n, "err", err)
		}
	}
	return nil
}

// conversation restores the session the run continues: GET
// <source>/<id>, a tar.gz of the vendor's state dir relative to HOME. It is
// best-effort: a store that is down, answers non-2xx or serves a bad
// archive, or an unusable header line, must not cost the run. The step
// then reports init/skipped (reason: the cause, message: what happened,
// without credentials), leaves the state dir empty, and writes
// cli.ConversationSkippedFile so `supervisor run` starts a fresh
// conversation instead of resuming one the CLI does not have. Only a local
// filesystem failure stops the pod.
func (s *steps) conversation(ctx context.Context) *failure {
	e := s.opts.Env
	marker := filepath.Join(s.opts.AgentDir, cli.ConversationSkippedFile)
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(ExitConversation, "conversation", fmt.Errorf("remove %s: %w", marker, err))
	}
	state := s.plan.Vendor.StateDir()
	if e.ConversationSource == "" || e.ConversationID == "" || state == "" {
		return nil
	}
	dir := filepath.Join(e.Home, state)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(ExitConversation, "conversation", err)
	}
	err := s.restore(ctx, state)
	if err == nil {
		return nil
	}
	cause := causeUnreachable
	var fe *fetchError
	if errors.As(err, &fe) {
		cause = fe.cause
	}
	if cause == causeBadArchive {
		// The archive failed half-way: what was unpacked is part of a
		// session, which no CLI should find.
		if err := os.RemoveAll(dir); err != nil {
			return fail(ExitConversation, "conversation", fmt.Errorf("clear a half-restored conversation: %w", err))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(ExitConversation, "conversation", err)
		}
	}
	msg := skipMessage(e.ConversationID, e.ConversationSource, err)
	s.log.Warn("conversation not restored; starting a fresh conversation",
		"conversation", e.ConversationID, "cause", cause, "err", err)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return fail(ExitConversation, "conversation", err)
	}
	if err := os.WriteFile(marker, []byte(msg+"\n"), 0o644); err != nil {
		return fail(ExitConversation, "conversation", err)
	}
	s.em.Event(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: "init", Status: "skipped", Reason: cause, Tool: "conversation", Message: msg}}})
	return nil
}

// restore fetches the conversation and unpacks it into HOME/state.
func (s *steps) restore(ctx context.Context, state string) error {
	e := s.opts.Env
	var header http.Header
	if e.ConversationAuth != "" {
		// The error names header lines and names, never their values.
		h, err := sinks.ParseHeaderLines(e.Getenv(e.ConversationAuth))
		if err != nil {
			return &fetchError{cause: causeAuthHeader, err: fmt.Errorf("header from %s: %w", e.ConversationAuth, err)}
		}
		header = h
	}
	return get(ctx, e.ConversationSource, e.ConversationID, header, func(r io.Reader) error {
		return extract(r, e.Home, state)
	})
}

// maxSkipMessage bounds a skipped restore's message: it ends up in a
// lifecycle event and an Agent condition.
const maxSkipMessage = 1024

// skipMessage is the one-line, credential-free explanation of a skipped
// restore, e.g. `conversation "abc" could not be restored from
// https://store/conv: status 503; starting a fresh conversation`.
func skipMessage(id, source string, err error) string {
	where := "its source"
	if u, perr := url.Parse(source); perr == nil && u.Host != "" {
		where = safeurl.String(u)
	}
	detail := err
	var fe *fetchError
	if errors.As(err, &fe) {
		// The url fetched is <source>/<id>, both named already.
		detail = fe.err
	}
	text := strings.Join(strings.Fields(detail.Error()), " ")
	text = truncate.String(text, maxSkipMessage)
	return fmt.Sprintf("conversation %q could not be restored from %s: %s; starting a fresh conversation", id, where, text)
}

// maxFailureMessage bounds a failed step's message: it ends up in a
// lifecycle event, the Agent's failureReason and a Kubernetes Event.
const maxFailureMessage = 1024

// urlUserinfo matches the userinfo of a url (up to its last "@" before the
// path, as repos.Redact reads it), wherever it is in a text.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@`)

// failureMessage is the one-line, bounded text of a failed step's error,
// with the userinfo of every url in it removed. The steps already keep
// credentials out of their errors (clone urls lose their userinfo before
// git sees them, git's output is redacted); this guards the event, which
// leaves the pod, against any url that slipped through.
func failureMessage(err error) string {
	text := strings.Join(strings.Fields(strings.ToValidUTF8(err.Error(), "")), " ")
	text = urlUserinfo.ReplaceAllString(text, "${1}<redacted>@")
	return truncate.String(text, maxFailureMessage)
}

// config writes the files the vendor CLI reads its MCP servers and
// settings from. They name secrets by variable only.
func (s *steps) config(context.Context) *failure {
	files, err := s.plan.Vendor.ConfigFiles(s.plan.Invocation)
	if err != nil {
		return fail(ExitConfig, "config", err)
	}
	for _, f := range files {
		p := filepath.Join(s.opts.Env.Home, filepath.FromSlash(f.Path))
		if rel, err := filepath.Rel(s.opts.Env.Home, p); err != nil || strings.HasPrefix(rel, "..") {
			return fail(ExitConfig, "config", fmt.Errorf("config file %s is outside HOME", f.Path))
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(ExitConfig, "config", err)
		}
		if err := os.WriteFile(p, f.Content, 0o600); err != nil {
			return fail(ExitConfig, "config", err)
		}
	}
	return nil
}

// chown hands HOME, the agent volume and the workspace to the agent's
// user: the init container runs as root, the agent does not, and fsGroup
// only fixes the volume roots. Symlinks are never followed.
func (s *steps) chown(context.Context) *failure {
	if s.opts.Chown == "" || os.Geteuid() != 0 {
		return nil
	}
	uidS, gidS, ok := strings.Cut(s.opts.Chown, ":")
	uid, err1 := strconv.Atoi(uidS)
	gid, err2 := strconv.Atoi(gidS)
	if !ok || err1 != nil || err2 != nil {
		return fail(ExitChown, "chown", fmt.Errorf("--supervisor-chown %q is not uid:gid", s.opts.Chown))
	}
	for _, root := range []string{s.opts.AgentDir, s.opts.Env.Home, s.opts.Env.Workspace} {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(ExitChown, "chown", fmt.Errorf("chown %s: %w", root, err))
		}
	}
	return nil
}
