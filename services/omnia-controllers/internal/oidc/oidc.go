// Package oidc reads an OpenID Connect issuer's key set (JWKS): the
// discovery document names the jwks_uri, and the document there must hold
// at least one key. It only fetches and checks shape; validating tokens is
// the facade's job. Errors name the step that failed and never quote a
// response body, so they are safe for conditions and events.
package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/truncate"
)

// MaxDocumentBytes caps each document read from the issuer, so a broken or
// hostile issuer cannot make the controller buffer an unbounded body.
const MaxDocumentBytes = 1 << 20

// DefaultTimeout bounds each of the two requests of a fetch.
const DefaultTimeout = 5 * time.Second

// maxEchoedIssuer bounds the issuer a remote document claims when an
// error quotes it (and from there a condition): the document is not ours.
const maxEchoedIssuer = 256

// DiscoveryPath is appended to the issuer to find its discovery document.
const DiscoveryPath = "/.well-known/openid-configuration"

// Fetcher fetches key sets. The zero value is usable.
type Fetcher struct {
	// HTTP sends the requests; a client with default transport when nil.
	HTTP *http.Client
	// Timeout bounds each request; DefaultTimeout when zero. It applies on
	// top of any timeout of HTTP, so an injected client without one is
	// still bounded.
	Timeout time.Duration
}

// DiscoveryURL is the discovery document of issuer, which may end in
// slashes.
func DiscoveryURL(issuer string) string {
	return strings.TrimRight(issuer, "/") + DiscoveryPath
}

// FetchJWKS reads issuer's discovery document, then the key set it names,
// and returns the key set verbatim once it holds at least one key.
func (f *Fetcher) FetchJWKS(ctx context.Context, issuer string) ([]byte, error) {
	disc := DiscoveryURL(issuer)
	body, err := f.get(ctx, disc)
	if err != nil {
		return nil, fmt.Errorf("discovery document %s: %w", disc, err)
	}
	uri, err := ParseDiscovery(body, issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery document %s: %w", disc, err)
	}
	jwks, err := f.get(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("key set %s: %w", uri, err)
	}
	if _, err := ParseJWKS(jwks); err != nil {
		return nil, fmt.Errorf("key set %s: %w", uri, err)
	}
	return jwks, nil
}

// ErrTooLarge is returned for a document over MaxDocumentBytes.
var ErrTooLarge = fmt.Errorf("document larger than %d bytes", MaxDocumentBytes)

func (f *Fetcher) get(ctx context.Context, u string) ([]byte, error) {
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	hc := f.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The transport error names the URL and the cause (refused,
		// timeout, TLS), never the body.
		var ue *url.Error
		if errors.As(err, &ue) {
			if ue.Timeout() {
				return nil, fmt.Errorf("timed out after %s", timeout)
			}
			return nil, ue.Err
		}
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d, want 200", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxDocumentBytes {
		return nil, ErrTooLarge
	}
	return body, nil
}

// ParseDiscovery returns the jwks_uri of issuer's discovery document,
// which must be an absolute http or https URL. The document must also name
// issuer itself (OpenID Connect Discovery 1.0, section 4.3): a document
// served for another issuer would have the agent trust that issuer's keys.
// Trailing slashes do not count in the comparison, as they do not in the
// address the document is fetched from.
func ParseDiscovery(body []byte, issuer string) (string, error) {
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		// The decoder's message may quote input; keep it out.
		return "", errors.New("not a JSON object")
	}
	if doc.JWKSURI == "" {
		return "", errors.New("no jwks_uri")
	}
	u, err := url.Parse(doc.JWKSURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("jwks_uri is not an absolute http(s) URL")
	}
	if doc.Issuer == "" {
		return "", errors.New("no issuer")
	}
	if strings.TrimRight(doc.Issuer, "/") != strings.TrimRight(issuer, "/") {
		return "", fmt.Errorf("issuer %q is not the configured %q", truncate.String(doc.Issuer, maxEchoedIssuer), issuer)
	}
	return doc.JWKSURI, nil
}

// ParseJWKS checks that body is a JSON object whose keys array is not
// empty and holds only objects, and returns the number of keys. The keys themselves are left to
// the facade, which knows the algorithms it accepts.
func ParseJWKS(body []byte) (int, error) {
	if !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return 0, errors.New("not a JSON object")
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, errors.New("not a JSON object with a keys array")
	}
	if len(doc.Keys) == 0 {
		return 0, errors.New("no keys")
	}
	for i, k := range doc.Keys {
		if !bytes.HasPrefix(k, []byte("{")) {
			return 0, fmt.Errorf("key %d is not a JSON object", i)
		}
	}
	return len(doc.Keys), nil
}
