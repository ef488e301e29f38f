package oidc

import (
	"net/url"
	"testing"
)

// FuzzParseDocuments feeds arbitrary bytes to both parsers: neither may
// panic, and what they accept must hold what the mirror relies on (an
// absolute http(s) jwks_uri; at least one key).
func FuzzParseDocuments(f *testing.F) {
	for _, s := range []string{
		`{"issuer":"https://id.example","jwks_uri":"https://id.example/keys"}`,
		`{"issuer":"https://other.example","jwks_uri":"https://id.example/keys"}`,
		`{"jwks_uri":""}`,
		`{"jwks_uri":"file:///x"}`,
		keySet,
		`{"keys":[]}`,
		`{"keys":[1,{}]}`,
		`null`,
		`[`,
		"\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if uri, err := ParseDiscovery(body, "https://id.example/"); err == nil {
			u, perr := url.Parse(uri)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("accepted jwks_uri %q", uri)
			}
		}
		if n, err := ParseJWKS(body); err == nil && n < 1 {
			t.Fatalf("accepted a key set with %d keys", n)
		}
	})
}
