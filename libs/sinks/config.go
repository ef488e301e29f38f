package sinks

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
)

// Sink types, the AgentDefinition's output.sinks types. NATS with a
// subject is a recipe's sink on its namespace's subject prefix; NATS
// without one is the platform's stream, which a definition cannot name
// (admission requires the subject).
const (
	TypeStdout = "stdout"
	TypeHTTP   = "http"
	TypeFile   = "file"
	TypeNATS   = "nats"
)

// Env names the run pod reads (docs/supervisor.md lists them all).
const (
	EnvSinks         = "AGENT_SINKS"
	EnvSelect        = "AGENT_SELECT"
	EnvNotifyURL     = "AGENT_NOTIFY_URL"
	EnvRetryAttempts = "AGENT_SINK_RETRY_ATTEMPTS"
	EnvRetryBaseMS   = "AGENT_SINK_RETRY_BASE_MS"
	EnvRetryMaxMS    = "AGENT_SINK_RETRY_MAX_MS"
)

// Config is one entry of output.sinks as the controller passes it in
// AGENT_SINKS: the JSON of v1alpha1.OutputSink (snake_case keys).
type Config struct {
	// Type is stdout, http, file or nats.
	Type string `json:"type"`
	// URL events are POSTed to (http).
	URL string `json:"url,omitempty"`
	// HeadersSecret names the env var holding extra header lines (http).
	HeadersSecret string `json:"headers_secret,omitempty"`
	// Path events are appended to (file).
	Path string `json:"path,omitempty"`
	// Subject is a nats sink's subject relative to the run namespace's
	// prefix (natsauth.SinkSubject); empty means the platform's stream.
	Subject string `json:"subject,omitempty"`
}

// maxSinks bounds what a hostile or broken AGENT_SINKS can make us build.
const maxSinks = 64

// ParseSinks parses AGENT_SINKS. Empty input means no sinks. Malformed
// JSON gives no sinks and an error; entries that are unusable (no type, an
// unknown type, an http sink without an http(s) url, a file sink without a
// path, a nats sink whose subject is not v1alpha1.SinkSubjectPattern) are
// skipped and named in the error, and the others are returned, so one bad
// entry does not silence the rest. Errors never quote urls, which may carry
// credentials, and quote subjects only truncated.
func ParseSinks(data []byte) ([]Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var raw []Config
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: malformed JSON: %w", EnvSinks, jsonError(err))
	}
	var out []Config
	var errs []error
	for i, c := range raw {
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", EnvSinks, i, err))
			continue
		}
		if len(out) == maxSinks {
			errs = append(errs, fmt.Errorf("%s: more than %d sinks, rest ignored", EnvSinks, maxSinks))
			break
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// jsonError keeps the position of a syntax error but not the offending
// input, which could be part of a secret pasted in the wrong place.
func jsonError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("syntax error at offset %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Errorf("field %q has the wrong type", typ.Field)
	}
	return errors.New("invalid JSON")
}

func (c Config) validate() error {
	switch c.Type {
	case TypeStdout:
		return nil
	case TypeNATS:
		if c.Subject == "" {
			return nil // the platform's stream
		}
		return checkSubject(c.Subject)
	case TypeHTTP:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("http sink needs an http(s) url")
		}
		return nil
	case TypeFile:
		if c.Path == "" {
			return errors.New("file sink needs a path")
		}
		return nil
	case "":
		return errors.New("sink without type")
	default:
		return fmt.Errorf("unknown sink type %q", truncate.String(c.Type, 32))
	}
}

// sinkSubject matches v1alpha1.SinkSubjectPattern, the rule admission
// applies to output.sinks[].subject.
var sinkSubject = regexp.MustCompile(v1alpha1.SinkSubjectPattern)

// checkSubject refuses a nats sink subject that is not one literal
// subject: a wildcard, an empty token or a space could make the run
// publish (or, for a consumer, match) outside the subject the recipe
// names. The error quotes at most 32 bytes of the subject.
func checkSubject(s string) error {
	if len(s) > v1alpha1.SinkSubjectMaxLength || !sinkSubject.MatchString(s) {
		return fmt.Errorf("nats sink subject %q must be at most %d characters of dot-separated tokens of letters, digits, \"_\" and \"-\" (no wildcards, no empty tokens)",
			truncate.String(s, 32), v1alpha1.SinkSubjectMaxLength)
	}
	return nil
}

// RetryPolicy is the http sink's retry schedule: Attempts tries in total,
// waiting min(Base·2^(n−1), Max) after failed attempt n, none after the last.
type RetryPolicy struct {
	Attempts  int
	Base, Max time.Duration
}

// DefaultRetryPolicy is 3 attempts, waiting 200 ms then 400 ms between them.
var DefaultRetryPolicy = RetryPolicy{Attempts: 3, Base: 200 * time.Millisecond, Max: 5 * time.Second}

// RetryPolicyFromEnv reads AGENT_SINK_RETRY_ATTEMPTS (min 1),
// AGENT_SINK_RETRY_BASE_MS and AGENT_SINK_RETRY_MAX_MS (negative clamps to
// 0); unset or garbage values keep the default.
func RetryPolicyFromEnv(getenv func(string) string) RetryPolicy {
	p := DefaultRetryPolicy
	if n, err := strconv.Atoi(strings.TrimSpace(getenv(EnvRetryAttempts))); err == nil {
		p.Attempts = max(n, 1)
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(getenv(EnvRetryBaseMS)), 10, 64); err == nil {
		p.Base = msDuration(n)
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(getenv(EnvRetryMaxMS)), 10, 64); err == nil {
		p.Max = msDuration(n)
	}
	return p
}

// msDuration converts milliseconds, clamping negatives to 0 and huge values
// to a day rather than overflowing.
func msDuration(ms int64) time.Duration {
	const day = 24 * time.Hour
	switch {
	case ms <= 0:
		return 0
	case ms > int64(day/time.Millisecond):
		return day
	default:
		return time.Duration(ms) * time.Millisecond
	}
}

// Backoff returns the schedule to step through for one delivery: its
// nth Step is the wait after failed attempt n. A zero Base or Max gives
// no wait at all.
func (p RetryPolicy) Backoff() wait.Backoff {
	if p.Base <= 0 || p.Max <= 0 {
		return wait.Backoff{}
	}
	// wait.Backoff caps only the waits it grew, so the first one is capped
	// here; Steps only has to outlast the growth, which the cap ends.
	return wait.Backoff{Duration: min(p.Base, p.Max), Factor: 2, Cap: p.Max, Steps: math.MaxInt}
}

// reservedHeaders are set by the sink itself; a secret cannot replace them.
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true,
	"Transfer-Encoding": true, "Connection": true,
}

// ParseHeaderLines parses the value of a headers_secret env var: one
// "Name: value" header per line, blank lines dropped (a stable format, so
// existing Secrets keep working). Lines that are not a valid
// header, and headers the sink sets itself, are skipped and reported by
// name only: the error never contains a value.
func ParseHeaderLines(s string) (http.Header, error) {
	h := http.Header{}
	var errs []error
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || !validHeaderName(name):
			errs = append(errs, fmt.Errorf("header line %d is not \"Name: value\"", i+1))
		case !validHeaderValue(value):
			errs = append(errs, fmt.Errorf("header %q has control characters in its value", name))
		case reservedHeaders[http.CanonicalHeaderKey(name)]:
			errs = append(errs, fmt.Errorf("header %q is set by the sink and cannot be overridden", name))
		default:
			h.Add(name, value)
		}
	}
	return h, errors.Join(errs...)
}

// validHeaderName accepts RFC 9110 token characters.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
