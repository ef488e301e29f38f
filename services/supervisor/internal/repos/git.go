package repos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
)

// CredentialCommand is the supervisor subcommand git runs as a credential
// helper: "<supervisor> git-credential <ENV> get" prints the token held in
// $ENV. The value is read at the moment git asks and never written to the
// clone's config, a file or an argv.
const CredentialCommand = "git-credential"

// Cloner runs git.
type Cloner struct {
	// Git is the git executable; empty is "git" on PATH.
	Git string
	// Helper is the supervisor binary the credential helper runs; it must
	// exist wherever the agent will use the clone (/agent/bin/supervisor).
	Helper string
	// Env is the environment git runs with; the token aliases (AliasEnv)
	// must be in it.
	Env []string
	// Log receives progress without urls' credentials or token values.
	Log *slog.Logger
}

// helperValue is the credential.helper config value for token variable
// name: it names the shell-safe alias (see TokenAlias), never the value.
// The "!" form runs through a shell, so both parts are quoted.
func (c *Cloner) helperValue(name string) string {
	return "!" + shellQuote(c.Helper) + " " + CredentialCommand + " " + shellQuote(TokenAlias(name))
}

// Clone clones r into dest (replacing what a failed earlier attempt left),
// checks out its ref and, with a token, keeps the credential helper in the
// clone's config so the agent can push later.
func (c *Cloner) Clone(ctx context.Context, r Repo, dest string) error {
	u, err := CloneURL(r.URL)
	if err != nil {
		return err
	}
	if strings.HasPrefix(r.Ref, "-") {
		return fmt.Errorf("repo %s ref: %w", r.Name, ErrOptionShaped)
	}
	if err := os.RemoveAll(dest); err != nil {
		return fmt.Errorf("clear %s: %w", dest, err)
	}
	// Inherited helpers are reset first; ext:: transports never run.
	base := []string{"-c", "protocol.ext.allow=never", "-c", "credential.helper="}
	token := r.TokenSecret != "" && ValidTokenName(r.TokenSecret)
	if r.TokenSecret != "" && !token {
		c.Log.Warn("token_secret is not a valid variable name; cloning without credentials", "repo", r.Name)
	}
	if token {
		base = append(base, "-c", "credential.helper="+c.helperValue(r.TokenSecret))
	}
	c.Log.Info("cloning", "repo", r.Name, "url", Redact(u), "dest", dest)
	if err := c.git(ctx, append(base, "clone", "--", u, dest)...); err != nil {
		return fmt.Errorf("clone %s: %w", r.Name, err)
	}
	if token {
		if err := c.git(ctx, "-C", dest, "config", "credential.helper", ""); err != nil {
			return fmt.Errorf("keep credential helper in %s: %w", r.Name, err)
		}
		if err := c.git(ctx, "-C", dest, "config", "--add", "credential.helper", c.helperValue(r.TokenSecret)); err != nil {
			return fmt.Errorf("keep credential helper in %s: %w", r.Name, err)
		}
	}
	if r.Ref != "" {
		// The ref was checked not to start with "-"; the trailing "--"
		// makes git read it as a revision only, never as a path.
		if err := c.git(ctx, "-C", dest, "checkout", "-q", r.Ref, "--"); err != nil {
			return fmt.Errorf("checkout %s of %s: %w", r.Ref, r.Name, err)
		}
	}
	return nil
}

// git runs one git command. Its output goes to the log (redacted),
// never to stdout, which is the run's event stream.
func (c *Cloner) git(ctx context.Context, args ...string) error {
	bin := c.Git
	if bin == "" {
		bin = "git"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(append([]string(nil), c.Env...), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(Redact(out.String()))
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("git %s exited %d: %s", args[firstVerb(args)], ee.ExitCode(), msg)
		}
		return fmt.Errorf("git %s: %w", args[firstVerb(args)], err)
	}
	return nil
}

// firstVerb finds the git subcommand among args, for error messages
// (which must not include the url).
func firstVerb(args []string) int {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-c", "-C":
			i++
		default:
			return i
		}
	}
	return 0
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CredentialHelper implements the git credential helper protocol for
// "get": it prints the x-access-token login and the value of the
// variable named by name. Other operations (store, erase) do nothing.
func CredentialHelper(name, op string, stdin io.Reader, stdout io.Writer, getenv func(string) string) error {
	_, _ = io.Copy(io.Discard, stdin) // git sends the request; every host gets the token
	if op != "get" {
		return nil
	}
	if !ValidTokenName(name) {
		return errors.New("invalid token variable name")
	}
	v := getenv(name)
	if v == "" {
		return fmt.Errorf("token variable %s is empty or unset", name)
	}
	if strings.ContainsAny(v, "\n\r\x00") {
		return fmt.Errorf("token variable %s holds a newline", name)
	}
	_, err := fmt.Fprintf(stdout, "username=x-access-token\npassword=%s\n", v)
	return err
}
