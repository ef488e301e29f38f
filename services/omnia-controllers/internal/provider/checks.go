package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/safeurl"
)

// Timeouts of the two HTTP checks.
const (
	healthTimeout = 5 * time.Second
	probeTimeout  = 10 * time.Second
	// probeCacheTTL is how long a probe verdict is reused for the same
	// Secret version; rotating the key (a new resourceVersion) probes again.
	probeCacheTTL = 30 * time.Minute
)

// defaultBaseURLs are the vendors' public API addresses.
var defaultBaseURLs = map[omniav1.ProviderType]string{
	omniav1.ProviderTypeClaude: "https://api.anthropic.com",
	omniav1.ProviderTypeOpenAI: "https://api.openai.com",
	omniav1.ProviderTypeGemini: "https://generativelanguage.googleapis.com",
}

func baseURL(spec *omniav1.ProviderSpec) string {
	if spec.BaseURL != "" {
		return strings.TrimRight(spec.BaseURL, "/")
	}
	return defaultBaseURLs[spec.Type]
}

// HealthURL is the address whose reachability is checked, or "" when there
// is none: the mock provider has no endpoint, a platform routes requests
// itself, speech and image roles have no common health path, and a type
// with neither a baseURL nor a public default has no address.
func HealthURL(spec *omniav1.ProviderSpec) string {
	if spec.Type == omniav1.ProviderTypeMock || spec.IsPlatformHosted() {
		return ""
	}
	switch spec.EffectiveRole() {
	case omniav1.ProviderRoleTTS, omniav1.ProviderRoleSTT, omniav1.ProviderRoleImage:
		return ""
	}
	base := baseURL(spec)
	if base != "" && spec.Type == omniav1.ProviderTypeOllama {
		// The path goes before a query the base URL may have.
		if tags, err := neturl.JoinPath(base, "api", "tags"); err == nil {
			return tags
		}
	}
	return base
}

// CheckHealth GETs the URL; any HTTP response counts as reachable.
func CheckHealth(ctx context.Context, c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return safeurl.Err(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return safeurl.Err(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.Body.Close()
}

// probeRequest builds the vendor's cheapest authenticated call, or nil
// when the type has none.
func probeRequest(ctx context.Context, spec *omniav1.ProviderSpec, key string) (*http.Request, error) {
	if spec.IsPlatformHosted() {
		return nil, nil
	}
	base := baseURL(spec)
	var path string
	hdr := http.Header{}
	switch spec.Type {
	case omniav1.ProviderTypeOpenAI:
		path = "/v1/models"
		hdr.Set("Authorization", "Bearer "+key)
	case omniav1.ProviderTypeClaude:
		path = "/v1/models"
		hdr.Set("x-api-key", key)
		hdr.Set("anthropic-version", "2023-06-01")
	case omniav1.ProviderTypeGemini:
		path = "/v1beta/models"
		hdr.Set("x-goog-api-key", key)
	default:
		return nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header = hdr
	return req, nil
}

// invalidKeyMarkers in a 400 body mean the key itself was refused.
var invalidKeyMarkers = []string{"api_key_invalid", "api key not valid", "invalid_api_key", "authentication_error"}

// Classify turns the vendor's answer into a verdict.
func Classify(status int, body string) ProbeResult {
	switch {
	case status >= 200 && status < 300:
		return ProbeResult{Verdict: ProbeAccepted, Detail: fmt.Sprintf("HTTP %d", status)}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ProbeResult{Verdict: ProbeRejected, Detail: fmt.Sprintf("HTTP %d", status)}
	case status == http.StatusBadRequest:
		l := strings.ToLower(body)
		for _, m := range invalidKeyMarkers {
			if strings.Contains(l, m) {
				return ProbeResult{Verdict: ProbeRejected, Detail: "HTTP 400 invalid API key"}
			}
		}
	}
	return ProbeResult{Verdict: ProbeError, Detail: fmt.Sprintf("HTTP %d", status)}
}

// probeCacheSize bounds the verdicts kept, one per Provider: past it the
// least recently probed Provider is probed again when next reconciled.
const probeCacheSize = 1024

// probeCache remembers the last conclusive verdict of each Provider for
// the Secret version and key it was made on. Keyed by Provider, a key
// rotation replaces the entry instead of adding one, the entry of a
// deleted Provider is dropped (Forget), and the LRU bound holds whatever
// happens: the cache can no longer grow with every rotation and every
// Provider that ever existed. The zero value is ready to use.
type probeCache struct {
	// size is the bound; probeCacheSize when 0.
	size int

	once sync.Once
	lru  *cache.LRUExpireCache
}

type cachedProbe struct {
	// fingerprint names what the verdict was made on: the Secret, its
	// resourceVersion and the key within it.
	fingerprint string
	res         ProbeResult
	at          time.Time
}

func (pc *probeCache) entries() *cache.LRUExpireCache {
	pc.once.Do(func() {
		n := pc.size
		if n <= 0 {
			n = probeCacheSize
		}
		pc.lru = cache.NewLRUExpireCache(n)
	})
	return pc.lru
}

// Forget drops the verdict of a Provider ("<ns>/<name>") that no longer
// exists.
func (pc *probeCache) Forget(provider string) { pc.entries().Remove(provider) }

// Len is the number of verdicts held.
func (pc *probeCache) Len() int { return len(pc.entries().Keys()) }

// ProbeCredential asks the vendor whether key is accepted, reusing the
// Provider's verdict when it was made on the same fingerprint less than
// probeCacheTTL before now. Transport errors are not cached: they say
// nothing about the key.
func (pc *probeCache) ProbeCredential(ctx context.Context, c *http.Client, spec *omniav1.ProviderSpec, key, provider, fingerprint string, now time.Time) ProbeResult {
	lru := pc.entries()
	if v, ok := lru.Get(provider); ok {
		// The TTL is checked against the caller's clock too: the LRU's
		// own expiry runs on the wall clock and only reclaims memory.
		if e := v.(cachedProbe); e.fingerprint == fingerprint && now.Sub(e.at) < probeCacheTTL {
			r := e.res
			r.Cached = true
			return r
		}
	}

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := probeRequest(ctx, spec, key)
	if err != nil {
		return ProbeResult{Verdict: ProbeError, Detail: "build request: " + safeurl.Err(err).Error()}
	}
	if req == nil {
		return ProbeResult{Verdict: ProbeUnsupported}
	}
	resp, err := noRedirects(c).Do(req)
	if err != nil {
		return ProbeResult{Verdict: ProbeError, Detail: "transport error"}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	res := Classify(resp.StatusCode, string(body))
	if res.Verdict == ProbeAccepted || res.Verdict == ProbeRejected {
		lru.Add(provider, cachedProbe{fingerprint: fingerprint, res: res, at: now}, probeCacheTTL)
	}
	return res
}

// noRedirects is c made never to follow a redirect: Go's client carries a
// request's custom headers (x-api-key, x-goog-api-key) to the redirect's
// target, so a vendor address that answers 3xx would hand the key to
// whatever host it names. A 3xx is then judged as the answer (ProbeError).
func noRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}
