package conversation

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// upload is one request a test store received.
type upload struct {
	method, path, contentType, auth string
	length                          int64
	body                            []byte
}

// recorder is a store that records what it gets and answers with status.
type recorder struct {
	mu      sync.Mutex
	got     []upload
	status  int
	handler http.HandlerFunc
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.got = append(rec.got, upload{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
		auth: r.Header.Get("X-Conv"), length: r.ContentLength, body: b})
	rec.mu.Unlock()
	if rec.handler != nil {
		rec.handler(w, r)
		return
	}
	w.WriteHeader(rec.status)
}

func (rec *recorder) uploads() []upload {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.got)
}

// homeWithSession is a HOME holding one claude session.
func homeWithSession(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	write(t, filepath.Join(home, ".claude", "projects", "-workspace", "pin-1.jsonl"), `{"type":"user"}`+"\n", 0o600)
	return home
}

// TestSave: a 2xx store gets one POST of the archive to <source>/<id>
// with the header, Content-Type and Content-Length; every failure is an
// *Error naming the url without userinfo or query and never a header
// value, and leaves no temporary file behind.
func TestSave(t *testing.T) {
	const secret = "conv-token-7f3a"
	tests := []struct {
		name     string
		status   int
		handler  func(other string) http.HandlerFunc
		source   func(base string) string
		maxBytes int64
		id       string
		noState  bool
		wantErr  string // empty: saved
		// posts is how many requests the store must have seen.
		posts int
		isErr error
	}{
		{name: "a 2xx answer saves the archive under the id", status: http.StatusCreated, posts: 1},
		{name: "the id is joined onto the source's path", status: http.StatusOK, posts: 1,
			source: func(base string) string { return base + "/conversations/" }},
		{name: "a 503 answer is an error with the status", status: http.StatusServiceUnavailable, posts: 1, wantErr: "status 503"},
		{name: "a missing state dir sends nothing", status: http.StatusOK, noState: true, wantErr: "state dir", isErr: ErrNoStateDir},
		{name: "an archive over the cap sends nothing", status: http.StatusOK, maxBytes: 16, wantErr: "larger than the cap", isErr: ErrTooLarge},
		{name: "an unreachable store is an error", source: func(string) string { return "http://127.0.0.1:1" }, wantErr: "connection refused"},
		{name: "a source that is not http is refused without echoing it",
			source: func(string) string { return "ftp://u:" + secret + "@store" }, wantErr: "not an http(s) url"},
		{name: "an empty id is refused", status: http.StatusOK, id: "-", wantErr: "no conversation id"},
		{name: "an id that climbs to another team's path of the store is refused before anything is sent", status: http.StatusOK,
			id: "../team-b/x", source: func(base string) string { return base + "/team-a/" },
			wantErr: "not a session id", isErr: agentsv1alpha1.ErrInvalidSessionID},
		{name: "an id with a slash is refused", status: http.StatusOK, id: "team-b/x", wantErr: "not a session id", isErr: agentsv1alpha1.ErrInvalidSessionID},
		{name: "a redirect to another host is not followed", posts: 1, wantErr: "status 307",
			handler: func(other string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, other+"/stolen", http.StatusTemporaryRedirect)
				}
			}},
		{name: "a redirect that would turn the POST into a GET is not followed", posts: 1, wantErr: "status 302",
			handler: func(string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }
			}},
		{name: "a same-host 308 resends the archive", posts: 2,
			handler: func(string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/pin-1" {
						http.Redirect(w, r, "/v2/pin-1", http.StatusPermanentRedirect)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := &recorder{status: http.StatusOK}
			otherSrv := httptest.NewServer(other)
			defer otherSrv.Close()
			rec := &recorder{status: tt.status}
			if tt.handler != nil {
				rec.handler = tt.handler(otherSrv.URL)
			}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			source := strings.Replace(srv.URL, "http://", "http://u:"+secret+"@", 1) + "?sig=" + secret
			if tt.source != nil {
				source = tt.source(strings.Replace(srv.URL, "http://", "http://u:"+secret+"@", 1))
			}
			home := homeWithSession(t)
			if tt.noState {
				home = t.TempDir()
			}
			id := "pin-1"
			switch tt.id {
			case "":
			case "-":
				id = ""
			default:
				id = tt.id
			}
			tmp := t.TempDir()
			s := Store{Source: source, Header: http.Header{"X-Conv": {secret}}, MaxBytes: tt.maxBytes, TempDir: tmp}
			rc, err := s.Save(context.Background(), id, home, ".claude/projects")

			if got := len(rec.uploads()); got != tt.posts {
				t.Fatalf("the store saw %d requests, want %d", got, tt.posts)
			}
			if n := len(other.uploads()); n != 0 {
				t.Fatalf("another host got %d requests with the store's header", n)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("temporary files left behind: %v", left)
			}
			if tt.wantErr != "" {
				var se *Error
				if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want an *Error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("a credential in the error: %v", err)
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Fatalf("err %v is not %v", err, tt.isErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ups := rec.uploads()
			up := ups[len(ups)-1]
			want, _ := pack(t, home, ".claude/projects")
			if up.method != http.MethodPost || up.contentType != ContentType || up.auth != secret ||
				up.length != int64(len(up.body)) || rc.Bytes != int64(len(up.body)) {
				t.Fatalf("upload %s %s type %q auth %q length %d (%d bytes); receipt %+v",
					up.method, up.path, up.contentType, up.auth, up.length, len(up.body), rc)
			}
			if got, wantNames := names(readArchive(t, up.body)), names(readArchive(t, want)); !slices.Equal(got, wantNames) {
				t.Fatalf("uploaded members %q, want %q", got, wantNames)
			}
			if !strings.HasSuffix(up.path, "/pin-1") || strings.Contains(rc.URL, secret) || !strings.HasSuffix(rc.URL, "/pin-1") {
				t.Fatalf("posted to %s, receipt url %s", up.path, rc.URL)
			}
		})
	}
}
