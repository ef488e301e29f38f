// Package repos clones the recipe's resources.repos (AGENT_REPOS) into the
// workspace with the git binary, guarded against hostile input:
// destinations confined below the workspace, option-shaped urls and refs
// refused, "--" before every positional, and a token used only through a
// credential helper that names the variable holding it.
package repos

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentplane/agentplane/libs/runspec"
)

// Repo is one resources.repos entry as AGENT_REPOS carries it.
type Repo struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Ref         string `json:"ref,omitempty"`
	Path        string `json:"path,omitempty"`
	TokenSecret string `json:"token_secret,omitempty"`
}

// Parse reads AGENT_REPOS; empty input is no repos.
func Parse(data string) ([]Repo, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var out []Repo
	if err := json.Unmarshal([]byte(data), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", runspec.EnvRepos, err)
	}
	return out, nil
}

// ErrOutside marks a destination that is not strictly below the
// workspace; the repo is skipped.
var ErrOutside = errors.New("destination is not inside the workspace")

// ErrOptionShaped marks a url or ref starting with "-", which git would
// read as an option.
var ErrOptionShaped = errors.New("looks like a command-line option")

// Dest returns where r is cloned: Path (absolute, or relative to the
// workspace) or the workspace/Name, cleaned. It must be strictly below the
// workspace, whose root must be absolute and not "/".
func Dest(workspace string, r Repo) (string, error) {
	root := filepath.Clean(workspace)
	if !filepath.IsAbs(root) || root == "/" {
		return "", fmt.Errorf("workspace %q: %w", workspace, ErrOutside)
	}
	p := r.Path
	if p == "" {
		p = r.Name
	}
	if p == "" {
		return "", fmt.Errorf("repo without name or path: %w", ErrOutside)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s: %w", r.Path+r.Name, ErrOutside)
	}
	return p, nil
}

var ownerName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// CloneURL returns the url git is given: "owner/name" means GitHub over
// https; an http(s) url loses any userinfo (credentials come from the
// helper, never the url); an ssh-style url keeps its login but not a
// password. Anything else, or a url starting with "-", is refused.
func CloneURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if strings.HasPrefix(s, "-") {
		return "", fmt.Errorf("repo url: %w", ErrOptionShaped)
	}
	switch {
	case ownerName.MatchString(s) && !strings.HasPrefix(s, "."):
		return "https://github.com/" + strings.TrimSuffix(s, ".git") + ".git", nil
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return "", errors.New("repo url does not parse") // never echo it: it may hold a password
		}
		switch u.Scheme {
		case "http", "https", "file", "git":
			u.User = nil
		case "ssh", "git+ssh", "ssh+git":
			if u.User != nil {
				u.User = url.User(u.User.Username())
			}
		default:
			// ext:: and friends run commands; only plain transports pass.
			return "", fmt.Errorf("repo url scheme %q is not allowed", u.Scheme)
		}
		return u.String(), nil
	case strings.Contains(s, "@"):
		// scp-like ssh, [user[:password]@]host:path. The userinfo ends at
		// the last "@" (so a password may hold "@"); a path with an "@"
		// needs the ssh:// form.
		at := strings.LastIndex(s, "@")
		user, rest := s[:at], s[at+1:]
		if !strings.Contains(rest, ":") || strings.HasPrefix(rest, "-") {
			return "", errors.New("repo url must be owner/name, a url with a scheme, or user@host:path")
		}
		if u, _, ok := strings.Cut(user, ":"); ok {
			user = u
		}
		return user + "@" + rest, nil
	default:
		return "", errors.New("repo url must be owner/name, a url with a scheme, or user@host:path")
	}
}

// Redact rewrites scheme://user:pass@ as scheme://<redacted>@ for logging.
func Redact(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return s[:i+3] + "<redacted>" + rest[at:]
	}
	return s
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// ValidTokenName reports whether name can be a token env var name.
// Dashes and dots are allowed: Kubernetes accepts them and secret keys
// carry them.
func ValidTokenName(name string) bool { return envName.MatchString(name) }

// TokenAlias is the shell-safe variable the credential helper reads for
// token variable name. git runs helpers through sh, and sh drops
// variables whose names hold a dash or a dot, so the supervisor exports
// the token under this alias too (init for the clone, run for the agent).
func TokenAlias(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return "AGENTPLANE_GIT_TOKEN_" + string(b)
}

// AliasEnv returns "alias=value" entries for the token variables of list
// that are set, to add to the environment of git and of the agent.
func AliasEnv(list []Repo, getenv func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range list {
		if r.TokenSecret == "" || !ValidTokenName(r.TokenSecret) || seen[r.TokenSecret] {
			continue
		}
		seen[r.TokenSecret] = true
		if v := getenv(r.TokenSecret); v != "" {
			out = append(out, TokenAlias(r.TokenSecret)+"="+v)
		}
	}
	return out
}
