package conversation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/safeurl"
)

// DefaultMaxBytes caps a saved archive when Store.MaxBytes is zero.
const DefaultMaxBytes = 256 << 20

// ContentType is the media type an archive is sent with.
const ContentType = "application/gzip"

// ErrTooLarge says the archive grew past the store's cap; nothing was
// sent.
var ErrTooLarge = errors.New("the conversation archive is larger than the cap")

// maxRedirects bounds the redirects a save follows.
const maxRedirects = 5

// client follows a redirect only when it keeps the method (307, 308) and
// the host: the store's header must reach no other host, and a 301, 302 or
// 303 would turn the POST into a GET that drops the archive and still
// answers 2xx.
var client = &http.Client{
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects || req.Method != http.MethodPost || req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// Store is a run's conversation store: archives live at <Source>/<id>.
type Store struct {
	// Source is the store's base URL, http or https; it may carry
	// userinfo, which never reaches an error or a Receipt.
	Source string
	// Header is sent with the upload (the store's credentials). Its values
	// never reach an error.
	Header http.Header
	// MaxBytes caps the archive; zero means DefaultMaxBytes.
	MaxBytes int64
	// TempDir holds the archive while it is sent; empty means
	// os.TempDir(). It must not be inside the state dir.
	TempDir string
}

// Receipt is what a save stored: where, without userinfo or query, and how
// many bytes.
type Receipt struct {
	URL   string
	Bytes int64
}

// Error is a failed save. URL is the target without userinfo or query
// (empty when the source is not a usable URL); Err never holds a header
// value.
type Error struct {
	URL string
	Err error
}

// Error describes the failure, naming the url without credentials.
func (e *Error) Error() string {
	if e.URL == "" {
		return "save the conversation: " + e.Err.Error()
	}
	return "save the conversation to " + e.URL + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Save packs home/stateDir (see Pack) into a temporary file and POSTs it
// to <Source>/<id> with Content-Type ContentType, Content-Length and
// Header; an id that is not a plain session id
// (agentsv1alpha1.SessionIDPattern) is refused before anything is packed
// or sent. Any 2xx answer is success. The archive is never held in memory,
// and one larger than MaxBytes is not sent (ErrTooLarge). ctx bounds the
// whole save, packing included. Errors are *Error.
func (s Store) Save(ctx context.Context, id, home, stateDir string) (Receipt, error) {
	u, err := url.Parse(s.Source)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The source is not echoed: it may hold a password.
		return Receipt{}, &Error{Err: errors.New("the source is not an http(s) url")}
	}
	if id == "" {
		return Receipt{}, &Error{Err: errors.New("no conversation id to save under")}
	}
	// JoinPath cleans "..": an id like "../team-b/x" would write over
	// another path of the store with this run's credentials.
	if err := agentsv1alpha1.CheckSessionID("the conversation id", id); err != nil {
		return Receipt{}, &Error{Err: err}
	}
	u = u.JoinPath(id)
	safe := safeurl.String(u)
	fail := func(err error) (Receipt, error) { return Receipt{}, &Error{URL: safe, Err: err} }

	f, err := os.CreateTemp(s.TempDir, ".conversation-*.tar.gz")
	if err != nil {
		return fail(fmt.Errorf("temporary archive: %w", err))
	}
	name := f.Name()
	defer func() { _ = os.Remove(name) }()
	limit := s.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	cw := &capWriter{w: f, limit: limit}
	perr := Pack(ctx, cw, home, stateDir)
	if cerr := f.Close(); perr == nil {
		perr = cerr
	}
	if perr != nil {
		return fail(perr)
	}

	body, err := os.Open(name)
	if err != nil {
		return fail(fmt.Errorf("temporary archive: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		_ = body.Close()
		return fail(err)
	}
	req.ContentLength = cw.n
	// A same-host 307 or 308 sends the archive again.
	req.GetBody = func() (io.ReadCloser, error) { return os.Open(name) }
	for k, vs := range s.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", ContentType)
	resp, err := client.Do(req)
	if err != nil {
		return fail(safeurl.Err(err))
	}
	defer func() { _ = resp.Body.Close() }()
	// Read a little of the answer so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fail(fmt.Errorf("status %d", resp.StatusCode))
	}
	return Receipt{URL: safe, Bytes: cw.n}, nil
}

// capWriter counts what passes through it and refuses to go past limit.
type capWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, fmt.Errorf("%w of %d bytes", ErrTooLarge, c.limit)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
