package sinks

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/natsauth"
)

// BuildOptions are what Build needs besides the sink configs.
type BuildOptions struct {
	// Getenv resolves headers_secret names and the retry env; nil is
	// os.Getenv. Secret keys may contain dashes, which shells cannot read,
	// so the value is looked up directly, never through a shell.
	Getenv func(string) string
	// Stdout, when set, is always a member (the run pod echoes every line
	// to its log); stdout entries in the configs collapse into it so no
	// line is printed twice. When nil, a stdout entry writes to os.Stdout.
	Stdout io.Writer
	// Publisher, when set, adds the platform's stream as an unfiltered
	// member. A "nats" entry without a subject in the configs needs it.
	Publisher *events.Publisher
	// NATSConn is the connection nats entries with a subject publish on;
	// nil uses Publisher.Conn(). A caller that publishes to the platform's
	// stream itself, and so passes no Publisher, sets it to that
	// Publisher's connection.
	NATSConn *nats.Conn
	// Namespace is the run's namespace: nats entries with a subject
	// publish under its prefix (natsauth.SinkSubject), the only one the
	// run's NATS credential may publish to. They need it.
	Namespace string
	// HTTPClient, HTTPTimeout and Retry configure http sinks; a zero Retry
	// is read from the AGENT_SINK_RETRY_* env.
	HTTPClient  *http.Client
	HTTPTimeout time.Duration
	Retry       RetryPolicy
	// Select, QueueSize and Logger are passed to NewSet.
	Select    Select
	QueueSize int
	Logger    *slog.Logger
}

// Build makes a Set from parsed sink configs. Problems with one sink (an
// unreadable headers secret, a nats entry without a Publisher, a nats
// subject without a connection or namespace) are reported in the error
// while the other sinks are still built; the returned Set is never nil.
func Build(cfgs []Config, opts BuildOptions) (*Set, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Retry.Attempts <= 0 {
		opts.Retry = RetryPolicyFromEnv(opts.Getenv)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var members []Member
	var errs []error
	stdout, nats := opts.Stdout != nil, opts.Publisher != nil
	for i, c := range cfgs {
		switch c.Type {
		case TypeStdout:
			stdout = true
		case TypeNATS:
			if c.Subject == "" {
				if opts.Publisher == nil {
					errs = append(errs, fmt.Errorf("sink %d: nats sink without a NATS publisher", i))
				}
				continue
			}
			s, err := natsSubjectSink(c, opts)
			if err != nil {
				errs = append(errs, fmt.Errorf("sink %d: %w", i, err))
				continue
			}
			members = append(members, Member{Name: TypeNATS + "-" + strconv.Itoa(i), Payloads: s})
		case TypeFile:
			members = append(members, Member{Name: "file-" + strconv.Itoa(i), Payloads: NewFile(c.Path)})
		case TypeHTTP:
			headers, err := secretHeaders(c, opts.Getenv)
			if err != nil {
				errs = append(errs, fmt.Errorf("sink %d: %w", i, err))
			}
			h, err := NewHTTP(HTTPOptions{URL: c.URL, Headers: headers, Client: opts.HTTPClient,
				Timeout: opts.HTTPTimeout, Retry: opts.Retry, Logger: opts.Logger})
			if err != nil {
				errs = append(errs, fmt.Errorf("sink %d: %w", i, err))
				continue
			}
			members = append(members, Member{Name: "http-" + strconv.Itoa(i), Payloads: h})
		default:
			errs = append(errs, fmt.Errorf("sink %d: %w", i, c.validate()))
		}
	}
	if stdout {
		w := opts.Stdout
		if w == nil {
			w = os.Stdout
		}
		members = append(members, Member{Name: TypeStdout, Sink: NewStdout(w)})
	}
	if nats {
		members = append(members, Member{Name: TypeNATS, Sink: NewNATS(opts.Publisher)})
	}
	set := NewSet(members, SetOptions{Select: opts.Select, QueueSize: opts.QueueSize, Logger: opts.Logger})
	return set, errors.Join(errs...)
}

// natsSubjectSink builds a recipe's nats sink. The subject is checked
// again here, not only in ParseSinks, since callers may build configs
// themselves: it is what keeps the run inside its namespace's prefix.
func natsSubjectSink(c Config, opts BuildOptions) (*NATSSubject, error) {
	if err := checkSubject(c.Subject); err != nil {
		return nil, err
	}
	nc := opts.NATSConn
	if nc == nil && opts.Publisher != nil {
		nc = opts.Publisher.Conn()
	}
	if nc == nil {
		return nil, fmt.Errorf("nats sink %q without a NATS publisher", c.Subject)
	}
	if opts.Namespace == "" {
		// An empty namespace would not map to one token of its own.
		return nil, fmt.Errorf("nats sink %q without the run's namespace", c.Subject)
	}
	return NewNATSSubject(nc, natsauth.SinkSubject(opts.Namespace, c.Subject)), nil
}

// secretHeaders reads the header lines from the env var the sink's
// headers_secret names. Errors name the variable and header names only.
func secretHeaders(c Config, getenv func(string) string) (http.Header, error) {
	if c.HeadersSecret == "" {
		return nil, nil
	}
	v := getenv(c.HeadersSecret)
	if v == "" {
		return nil, fmt.Errorf("headers_secret %q: env var empty or unset, sending without its headers", c.HeadersSecret)
	}
	h, err := ParseHeaderLines(v)
	if err != nil {
		return h, fmt.Errorf("headers_secret %q: %w", c.HeadersSecret, err)
	}
	return h, nil
}

// FromEnv reads the run pod's sink env: AGENT_SINKS, plus an http sink for
// AGENT_NOTIFY_URL when set, and AGENT_SELECT.
// Errors are for logging: what could be parsed is returned regardless.
func FromEnv(getenv func(string) string) ([]Config, Select, error) {
	cfgs, err1 := ParseSinks([]byte(getenv(EnvSinks)))
	if u := getenv(EnvNotifyURL); u != "" {
		c := Config{Type: TypeHTTP, URL: u}
		if err := c.validate(); err != nil {
			err1 = errors.Join(err1, fmt.Errorf("%s: %w", EnvNotifyURL, err))
		} else {
			cfgs = append(cfgs, c)
		}
	}
	sel, err2 := ParseSelect([]byte(getenv(EnvSelect)))
	return cfgs, sel, errors.Join(err1, err2)
}
