package run

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/supervisor/internal/conversation"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
)

// saveTimeout bounds saving the conversation, packing and upload.
const saveTimeout = 2 * time.Minute

// saveAfterSignal bounds the save once the pod is being stopped: the
// kubelet's default grace is 30 s, of which the CLI's own stop (10 s by
// default) and the event flush (flushTimeout) are already spent.
const saveAfterSignal = 10 * time.Second

// saveMaxBytes caps the archive; a larger one is not sent.
const saveMaxBytes = conversation.DefaultMaxBytes

// saveConversation saves the vendor's state dir (HOME/<state dir>) to the
// conversation store under id, once the CLI has ended: a Job run's pin, a
// realtime session's last session id. It is best-effort: a store that is
// down or refuses, an archive too large, or anything else that goes wrong
// is logged as a warning and changes neither the exit code nor an event.
// terminated says the pod is being stopped, which leaves less time.
func (r *runner) saveConversation(v vendors.Vendor, id string, terminated bool) {
	env := r.opts.Env
	if env.ConversationSource == "" || id == "" {
		return
	}
	log := r.log.With("conversation", id)
	state := v.StateDir()
	if state == "" {
		log.Info("the vendor keeps no conversation; nothing to save", "vendor", v.Name())
		return
	}
	var header http.Header
	if env.ConversationAuth != "" {
		// The error names header lines and names, never values.
		h, err := sinks.ParseHeaderLines(env.Getenv(env.ConversationAuth))
		if err != nil {
			log.Warn("conversation not saved: the store's header line is unusable", "header_env", env.ConversationAuth, "err", err)
			return
		}
		header = h
	}
	ctx, cancel := r.saveContext(terminated)
	defer cancel()
	if err := ctx.Err(); err != nil {
		log.Warn("conversation not saved: no time left before the run's deadline")
		return
	}
	store := conversation.Store{Source: env.ConversationSource, Header: header, MaxBytes: saveMaxBytes,
		TempDir: r.tempDir()}
	rec, err := store.Save(ctx, id, env.Home, state)
	switch {
	case errors.Is(err, conversation.ErrNoStateDir):
		log.Warn("conversation not saved: the CLI left no state dir", "state_dir", state, "err", err)
	case err != nil:
		log.Warn("conversation not saved", "err", err)
	default:
		log.Info("conversation saved", "url", rec.URL, "bytes", rec.Bytes)
	}
}

// saveContext bounds a save (see saveBy); a signal during the save ends
// it.
func (r *runner) saveContext(terminated bool) (context.Context, context.CancelFunc) {
	origin := deadlineOrigin(r.opts.Start, filepath.Join(r.opts.AgentDir, emit.StartedFile))
	ctx, cancel := context.WithDeadline(context.Background(), saveBy(time.Now(), origin, r.opts.Env.Deadline, terminated))
	go func() {
		select {
		case sig := <-r.opts.Signals:
			r.log.Warn("signal received; cutting the conversation save short", "signal", sig.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// saveBy is when a save starting at now must be over: saveTimeout later,
// saveAfterSignal once the pod is being stopped, and with a deadline no
// later than the Job's own (runspec.DeadlineMargin after the run's,
// counted from origin) less flushTimeout, so the terminal event still gets
// out.
func saveBy(now, origin time.Time, deadline time.Duration, terminated bool) time.Time {
	by := now.Add(saveTimeout)
	if terminated {
		by = now.Add(saveAfterSignal)
	}
	if deadline > 0 {
		if job := origin.Add(deadline + runspec.DeadlineMargin - flushTimeout); job.Before(by) {
			by = job
		}
	}
	return by
}

// tempDir is where the archive is built: the agent volume's state
// directory, outside every vendor's state dir, on a volume with room.
func (r *runner) tempDir() string {
	dir := filepath.Join(r.opts.AgentDir, filepath.Dir(emit.SequenceFile))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return dir
}
