package kubeutil

import "testing"

func TestDisplayURL(t *testing.T) {
	for _, tc := range []struct{ rule, raw, want string }{
		{"a plain URL is shown as it is", "https://api.github.com/v3", "https://api.github.com/v3"},
		{"user and password are dropped", "https://user:s3cret@api.example.com/x", "https://api.example.com/x"},
		{"a token as the user is dropped", "https://ghp_token@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"the query is dropped", "https://generativelanguage.googleapis.com/v1?key=k3y", "https://generativelanguage.googleapis.com/v1"},
		{"the fragment is dropped", "https://example.com/a#access_token=t0k", "https://example.com/a"},
		{"the port is kept", "http://10.0.0.1:8080/health", "http://10.0.0.1:8080/health"},
		{"a URL that does not parse is not shown", "https://user:s3cret@[::1", "(a URL that does not parse)"},
		{"a URL without a host is not shown", "s3cret", "(a URL that does not parse)"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := DisplayURL(tc.raw); got != tc.want {
				t.Fatalf("DisplayURL(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}
