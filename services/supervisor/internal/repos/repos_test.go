package repos

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestDest(t *testing.T) {
	tests := []struct {
		name      string
		workspace string
		repo      Repo
		want      string
		outside   bool
	}{
		{name: "name under the workspace", workspace: "/workspace", repo: Repo{Name: "api"}, want: "/workspace/api"},
		{name: "relative path under the workspace", workspace: "/workspace", repo: Repo{Name: "x", Path: "src/api"}, want: "/workspace/src/api"},
		{name: "absolute path under the workspace", workspace: "/workspace", repo: Repo{Path: "/workspace/a/b"}, want: "/workspace/a/b"},
		{name: "dot-dot escaping is refused", workspace: "/workspace", repo: Repo{Path: "../etc"}, outside: true},
		{name: "dot-dot inside that ends outside is refused", workspace: "/workspace", repo: Repo{Path: "a/../../x"}, outside: true},
		{name: "absolute path elsewhere is refused", workspace: "/workspace", repo: Repo{Path: "/agent/bin"}, outside: true},
		{name: "a sibling sharing the prefix is refused", workspace: "/workspace", repo: Repo{Path: "/workspace2/x"}, outside: true},
		{name: "the workspace itself is refused", workspace: "/workspace", repo: Repo{Path: "."}, outside: true},
		{name: "a root workspace is refused", workspace: "/", repo: Repo{Name: "x"}, outside: true},
		{name: "a relative workspace is refused", workspace: "ws", repo: Repo{Name: "x"}, outside: true},
		{name: "no name and no path is refused", workspace: "/workspace", repo: Repo{}, outside: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Dest(tt.workspace, tt.repo)
			if tt.outside {
				if !errors.Is(err, ErrOutside) {
					t.Fatalf("want ErrOutside, got %q, %v", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCloneURL(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{name: "owner/name is GitHub over https", in: "acme/api", want: "https://github.com/acme/api.git"},
		{name: "https credentials are stripped", in: "https://user:hunter2@example.com/a.git", want: "https://example.com/a.git"},
		{name: "https without credentials is kept", in: "https://example.com/a.git", want: "https://example.com/a.git"},
		{name: "ssh url keeps the login without password", in: "ssh://git:pw@example.com/a.git", want: "ssh://git@example.com/a.git"},
		{name: "scp-like keeps the login without password", in: "git:p@ss@example.com:a/b.git", want: "git@example.com:a/b.git"},
		{name: "file url is allowed for local origins", in: "file:///srv/a.git", want: "file:///srv/a.git"},
		{name: "option-shaped url is refused", in: "--upload-pack=touch /tmp/x", bad: true},
		{name: "ext transport is refused", in: "ext::sh -c touch% /tmp/x", bad: true},
		{name: "unknown scheme is refused", in: "gopher://x/y", bad: true},
		{name: "a bare word is refused", in: "api", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CloneURL(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("accepted as %q", got)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatal("error leaks the password")
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"fatal: https://u:p@h/x not found": "fatal: https://<redacted>@h/x not found",
		"https://h/x":                      "https://h/x",
		"no url here":                      "no url here",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCredentialHelper(t *testing.T) {
	env := map[string]string{"gh-token": "tok123", "NL": "a\nb"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	if err := CredentialHelper("gh-token", "get", strings.NewReader("protocol=https\nhost=x\n\n"), &out, getenv); err != nil {
		t.Fatal(err)
	}
	if out.String() != "username=x-access-token\npassword=tok123\n" {
		t.Fatalf("got %q", out.String())
	}
	out.Reset()
	if err := CredentialHelper("gh-token", "store", strings.NewReader(""), &out, getenv); err != nil || out.Len() != 0 {
		t.Fatalf("store must do nothing: %q, %v", out.String(), err)
	}
	for _, name := range []string{"missing", "NL", "$(x)"} {
		err := CredentialHelper(name, "get", strings.NewReader(""), &out, getenv)
		if err == nil || strings.Contains(err.Error(), "a\nb") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
