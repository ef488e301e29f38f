package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
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
		base += "/api/tags"
	}
	return base
}

// CheckHealth GETs the URL; any HTTP response counts as reachable.
func CheckHealth(ctx context.Context, c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
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

// probeCache remembers verdicts per Provider and Secret version.
type probeCache struct {
	mu sync.Mutex
	m  map[string]cachedProbe
}

type cachedProbe struct {
	res ProbeResult
	at  time.Time
}

// ProbeCredential asks the vendor whether key is accepted, reusing a
// verdict for the same cacheKey younger than probeCacheTTL. Transport
// errors are not cached: they say nothing about the key.
func (pc *probeCache) ProbeCredential(ctx context.Context, c *http.Client, spec *omniav1.ProviderSpec, key, cacheKey string, now time.Time) ProbeResult {
	pc.mu.Lock()
	if e, ok := pc.m[cacheKey]; ok && now.Sub(e.at) < probeCacheTTL {
		pc.mu.Unlock()
		r := e.res
		r.Cached = true
		return r
	}
	pc.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := probeRequest(ctx, spec, key)
	if err != nil {
		return ProbeResult{Verdict: ProbeError, Detail: "build request: " + err.Error()}
	}
	if req == nil {
		return ProbeResult{Verdict: ProbeUnsupported}
	}
	resp, err := c.Do(req)
	if err != nil {
		return ProbeResult{Verdict: ProbeError, Detail: "transport error"}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	res := Classify(resp.StatusCode, string(body))
	if res.Verdict == ProbeAccepted || res.Verdict == ProbeRejected {
		pc.mu.Lock()
		if pc.m == nil {
			pc.m = map[string]cachedProbe{}
		}
		pc.m[cacheKey] = cachedProbe{res: res, at: now}
		pc.mu.Unlock()
	}
	return res
}
