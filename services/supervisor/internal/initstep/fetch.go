package initstep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/safeurl"
)

const syscallNoFollow = syscall.O_NOFOLLOW

// emitFlush bounds delivery of the init events before the pod moves on.
const emitFlush = 5 * time.Second

// fetchTimeout bounds one download (skills, settings, a conversation).
const fetchTimeout = 2 * time.Minute

// maxSettingsBytes bounds settings.json.
const maxSettingsBytes = 1 << 20

// httpClient never follows a redirect to another host with our headers:
// a conversation credential must only reach the source it was meant for.
var httpClient = &http.Client{
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// Causes of a failed download, short enough to be a lifecycle reason (a
// skipped conversation restore reports its cause as the reason). A non-2xx
// answer is "status-<code>", see statusCause.
const (
	causeBadSource   = "bad-source"
	causeUnreachable = "unreachable"
	causeBadArchive  = "bad-archive"
	causeAuthHeader  = "auth-header"
)

func statusCause(code int) string { return "status-" + strconv.Itoa(code) }

// fetchError is a failed download: the url without credentials (empty when
// the source is not a usable url), a machine-readable cause, and what went
// wrong.
type fetchError struct {
	url   string
	cause string
	err   error
}

func (e *fetchError) Error() string {
	if e.url == "" {
		return e.err.Error()
	}
	return "GET " + e.url + ": " + e.err.Error()
}

func (e *fetchError) Unwrap() error { return e.err }

// get fetches base/name and calls fn with the body of a 2xx answer. The
// error, a *fetchError, never includes header values; it names the url
// without userinfo. An error of fn is a bad archive: fn unpacks the body,
// and a body cut off half-way is as unusable as a malformed one.
func get(ctx context.Context, base, name string, header http.Header, fn func(io.Reader) error) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &fetchError{cause: causeBadSource, err: errors.New("source is not an http(s) url")}
	}
	u = u.JoinPath(name)
	safe := safeurl.String(u)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return &fetchError{url: safe, cause: causeBadSource, err: err}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return &fetchError{url: safe, cause: causeUnreachable, err: safeurl.Err(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &fetchError{url: safe, cause: statusCause(resp.StatusCode), err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	if err := fn(resp.Body); err != nil {
		return &fetchError{url: safe, cause: causeBadArchive, err: err}
	}
	return nil
}

// writeFile stores body at p (parents created), at most limit bytes.
func writeFile(p string, body io.Reader, limit int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("larger than %d bytes", limit)
	}
	return os.WriteFile(p, b, 0o644)
}

// skillName is what a skill may be called: no leading dot, no slash, so a
// name can never leave the skills directory.
var skillName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`)
