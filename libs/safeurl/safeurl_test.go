package safeurl

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ rule, raw, want string }{
		{"a plain URL is shown as it is", "https://api.github.com/v3", "https://api.github.com/v3"},
		{"user and password are dropped", "https://user:s3cret@api.example.com/x", "https://api.example.com/x"},
		{"a token as the user is dropped", "https://ghp_token@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"the query is dropped", "https://generativelanguage.googleapis.com/v1?key=k3y", "https://generativelanguage.googleapis.com/v1"},
		{"the fragment is dropped", "https://example.com/a#access_token=t0k", "https://example.com/a"},
		{"the port is kept", "http://10.0.0.1:8080/health", "http://10.0.0.1:8080/health"},
		{"a URL that does not parse is not shown", "https://user:s3cret@[::1", Unparsable},
		{"a URL without a host is not shown", "s3cret", Unparsable},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := Parse(tc.raw); got != tc.want {
				t.Fatalf("Parse(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestErr(t *testing.T) {
	const secret = "s3cret"
	raw := "http://user:" + secret + "@127.0.0.1:1/x?key=" + secret
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, doErr := http.DefaultClient.Do(req)                                                //nolint:bodyclose // the request fails: there is no body
	_, parseErr := url.Parse(strings.Join([]string{"http://user:", secret, "@[::1"}, "")) // a host that does not parse
	for _, tc := range []struct {
		rule string
		err  error
		is   error
	}{
		{"a client error keeps its operation and cause, not the URL", doErr, context.Canceled},
		{"a parse error loses the URL it quotes", parseErr, nil},
		{"an error without a URL passes as it is", errors.New("plain " + "cause"), nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := Err(tc.err)
			if strings.Contains(got.Error(), secret) {
				t.Fatalf("Err(%v) = %q still shows the credential", tc.err, got)
			}
			if tc.is != nil && !errors.Is(got, tc.is) {
				t.Fatalf("Err(%v) = %v; errors.Is(%v) is false", tc.err, got, tc.is)
			}
		})
	}
	if got := Err(errors.New("plain cause")); got.Error() != "plain cause" {
		t.Fatalf("an error without a URL became %q", got)
	}
}
