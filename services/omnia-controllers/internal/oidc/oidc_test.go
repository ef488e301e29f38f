package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const keySet = `{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}`

// issuer serves a discovery document and a key set; each handler can be
// replaced per case.
type issuer struct {
	srv       *httptest.Server
	discovery http.HandlerFunc
	jwks      http.HandlerFunc
	hits      atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	is.discovery = func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"issuer":"` + is.srv.URL + `","jwks_uri":"` + is.srv.URL + `/keys"}`))
	}
	is.jwks = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(keySet)) }
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		switch r.URL.Path {
		case DiscoveryPath:
			is.discovery(w, r)
		case "/keys":
			is.jwks(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func TestFetchJWKS(t *testing.T) {
	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) })
	cases := []struct {
		name      string
		discovery http.HandlerFunc // nil keeps the working one
		jwks      http.HandlerFunc
		timeout   time.Duration
		wantErr   string // "" for success
	}{
		{name: "a working issuer yields its key set verbatim"},
		{name: "discovery must answer 200",
			discovery: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			wantErr:   "openid-configuration: status 404"},
		{name: "discovery without jwks_uri fails",
			discovery: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"issuer":"x"}`)) },
			wantErr:   "no jwks_uri"},
		{name: "a jwks_uri that is not http(s) fails",
			discovery: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"jwks_uri":"file:///etc/passwd"}`))
			},
			wantErr: "not an absolute http(s) URL"},
		{name: "a discovery document must name the issuer",
			discovery: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"jwks_uri":"https://id.example/keys"}`))
			},
			wantErr: "no issuer"},
		{name: "a discovery document of another issuer fails",
			discovery: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"issuer":"https://evil.example","jwks_uri":"https://evil.example/keys"}`))
			},
			wantErr: `issuer "https://evil.example" is not the configured`},
		{name: "discovery that is not JSON fails",
			discovery: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`<html>`)) },
			wantErr:   "not a JSON object"},
		{name: "the key set must answer 200",
			jwks:    func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
			wantErr: "status 500"},
		{name: "an empty keys array fails",
			jwks:    func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"keys":[]}`)) },
			wantErr: "no keys"},
		{name: "a key set without keys fails",
			jwks:    func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"other":1}`)) },
			wantErr: "no keys"},
		{name: "a body over 1 MiB fails",
			jwks: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"keys":[{"kid":"` + strings.Repeat("a", MaxDocumentBytes) + `"}]}`))
			},
			wantErr: "larger than"},
		{name: "a body of exactly 1 MiB is read",
			jwks: func(w http.ResponseWriter, _ *http.Request) {
				head, tail := `{"keys":[{"kid":"`, `"}]}`
				_, _ = w.Write([]byte(head + strings.Repeat("a", MaxDocumentBytes-len(head)-len(tail)) + tail))
			}},
		{name: "a server slower than the timeout fails",
			discovery: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-slow:
				case <-r.Context().Done():
				}
			},
			timeout: 50 * time.Millisecond,
			wantErr: "timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := newIssuer(t)
			if tc.discovery != nil {
				is.discovery = tc.discovery
			}
			if tc.jwks != nil {
				is.jwks = tc.jwks
			}
			f := &Fetcher{HTTP: is.srv.Client(), Timeout: tc.timeout}
			got, err := f.FetchJWKS(context.Background(), is.srv.URL+"/")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("FetchJWKS: %v", err)
				}
				if _, err := ParseJWKS(got); err != nil {
					t.Fatalf("returned key set does not parse: %v", err)
				}
				if tc.jwks == nil && string(got) != keySet {
					t.Fatalf("key set %q; want it verbatim", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v; want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), `"kty"`) || strings.Contains(err.Error(), "aaaa") {
				t.Fatalf("error quotes a response body: %v", err)
			}
		})
	}
}

// TestDiscoveryURLTrimsSlashes: the issuer is used without its trailing
// slashes, so "https://id.example/" and "https://id.example" are the same
// issuer.
func TestDiscoveryURLTrimsSlashes(t *testing.T) {
	for _, in := range []string{"https://id.example", "https://id.example/", "https://id.example//"} {
		if got := DiscoveryURL(in); got != "https://id.example/.well-known/openid-configuration" {
			t.Errorf("DiscoveryURL(%q) = %q", in, got)
		}
	}
}

// TestTransportErrorNamesCause: a refused connection is reported as such,
// not as a timeout.
func TestTransportErrorNamesCause(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, err := (&Fetcher{}).FetchJWKS(context.Background(), addr)
	if err == nil || strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "discovery document") {
		t.Fatalf("err %v; want a discovery transport error", err)
	}
	if errors.Is(err, ErrTooLarge) {
		t.Fatal("transport error classified as too large")
	}
}

func TestParseJWKS(t *testing.T) {
	cases := []struct {
		name, body string
		want       int // 0: error
	}{
		{"one key", keySet, 1},
		{"whitespace around keys is fine", " {\n \"keys\" : [ {\"kid\":\"a\"} , {\"kid\":\"b\"} ] }", 2},
		{"a top-level array is refused", `[{"kid":"a"}]`, 0},
		{"null is refused", `null`, 0},
		{"keys that are not objects are refused", `{"keys":[1]}`, 0},
		{"keys that is not an array is refused", `{"keys":{}}`, 0},
		{"trailing garbage is refused", `{"keys":[{}]}x`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseJWKS([]byte(tc.body))
			if (err == nil) != (tc.want > 0) || n != tc.want {
				t.Fatalf("ParseJWKS = %d, %v; want %d keys", n, err, tc.want)
			}
		})
	}
}
