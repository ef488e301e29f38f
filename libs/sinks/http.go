package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agentplane/agentplane/libs/ctxtime"
	"github.com/agentplane/agentplane/libs/safeurl"
)

// DefaultHTTPTimeout bounds one POST (connect, send, response headers).
// Without it a hung endpoint would hold the stream forever.
const DefaultHTTPTimeout = 10 * time.Second

// HTTPOptions configures NewHTTP.
type HTTPOptions struct {
	// URL events are POSTed to.
	URL string
	// Headers are added to every request (from headers_secret). They are
	// secrets: the sink never logs or returns them.
	Headers http.Header
	// Client sends the requests; nil uses one that never follows redirects
	// (a redirect would carry the headers to another host).
	Client *http.Client
	// Timeout bounds each attempt; 0 is DefaultHTTPTimeout.
	Timeout time.Duration
	// Retry is the retry schedule; zero Attempts uses DefaultRetryPolicy.
	Retry RetryPolicy
	// Logger receives retry notices (url without credentials or query).
	Logger *slog.Logger
}

// StatusError is a non-2xx answer of the endpoint.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
}

func (e *StatusError) Error() string { return fmt.Sprintf("status %d", e.Code) }

// HTTP POSTs each sink payload to a URL, one per request.
// Any 2xx is delivered. Network errors, 5xx, 408 and 429 are retried per
// the RetryPolicy; other answers (4xx, and 3xx since redirects are not
// followed) are not, since sending the same request again cannot fix them.
type HTTP struct {
	url     string
	safeURL string
	headers http.Header
	client  *http.Client
	timeout time.Duration
	retry   RetryPolicy
	log     *slog.Logger
}

// NewHTTP returns an HTTP sink.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("http sink needs an http(s) url")
	}
	s := &HTTP{
		url:     opts.URL,
		safeURL: safeurl.String(u),
		headers: opts.Headers.Clone(),
		client:  opts.Client,
		timeout: opts.Timeout,
		retry:   opts.Retry,
		log:     opts.Logger,
	}
	if s.client == nil {
		s.client = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if s.timeout <= 0 {
		s.timeout = DefaultHTTPTimeout
	}
	if s.retry.Attempts <= 0 {
		s.retry = DefaultRetryPolicy
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// DeliverPayload implements PayloadSink.
func (s *HTTP) DeliverPayload(ctx context.Context, body []byte) error {
	var last error
	backoff := s.retry.Backoff()
	for attempt := 1; attempt <= s.retry.Attempts; attempt++ {
		retry, err := s.post(ctx, body)
		if err == nil {
			return nil
		}
		last = err
		if !retry || ctx.Err() != nil || attempt == s.retry.Attempts {
			break
		}
		wait := backoff.Step()
		s.log.Debug("http sink attempt failed, retrying", "url", s.safeURL, "attempt", attempt, "wait", wait, "err", err)
		if !ctxtime.Sleep(ctx, wait) {
			break
		}
	}
	return fmt.Errorf("http sink %s: %w", s.safeURL, last)
}

// post sends body once and reports whether a failure is worth retrying.
func (s *HTTP) post(ctx context.Context, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("cannot build request")
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// url.Error repeats the URL, query string included.
		return true, safeurl.Err(err)
	}
	// Drain a little so the connection can be reused; the body is ignored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c >= 500, c == http.StatusRequestTimeout, c == http.StatusTooManyRequests:
		return true, &StatusError{Code: c}
	default:
		return false, &StatusError{Code: c}
	}
}

// Close implements Sink.
func (s *HTTP) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}
