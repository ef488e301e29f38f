package initstep

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/sinks"
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

// get fetches base/name and calls fn with the body of a 2xx answer. The
// error never includes header values; it names the url without userinfo.
func get(ctx context.Context, base, name string, header http.Header, fn func(io.Reader) error) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("source is not an http(s) url")
	}
	u = u.JoinPath(name)
	safe := sinks.SafeURL(u)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", safe, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", safe, scrub(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: status %d", safe, resp.StatusCode)
	}
	if err := fn(resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", safe, err)
	}
	return nil
}

// scrub drops the url from a *url.Error, whose text repeats it in full.
func scrub(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
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

// skillName is the reference's rule: no leading dot, no slash.
var skillName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`)
