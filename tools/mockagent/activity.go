package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// reporter writes one activity report: the open sessions and the time of
// the last change.
type reporter interface {
	report(ctx context.Context, sessions int, at time.Time) error
}

// activity sends the facade's session count to its reporter: at once on
// a change when the last report is at least every old, else once every
// has passed since it (the latest count then), so a burst of sessions
// costs one write per period, never one per session. While sessions are
// open it reports again every heartbeat, as activity at that time, so
// an entry the controller dropped (its cache had not seen the pod yet)
// comes back, and the idle deadline keeps counting from recent activity.
type activity struct {
	rep       reporter
	every     time.Duration
	heartbeat time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu       sync.Mutex
	sessions int
	changed  time.Time
	pending  bool
	wake     chan struct{}
}

func newActivity(rep reporter, every, heartbeat time.Duration, now func() time.Time, log *slog.Logger) *activity {
	return &activity{rep: rep, every: every, heartbeat: heartbeat, now: now, log: log, wake: make(chan struct{}, 1)}
}

// set records the open session count; run reports it.
func (a *activity) set(n int) {
	a.mu.Lock()
	a.sessions, a.changed, a.pending = n, a.now(), true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run reports each change, at most one report per every, until ctx ends.
// A failed report is retried at the next period.
func (a *activity) run(ctx context.Context) {
	var last time.Time
	for {
		a.mu.Lock()
		pending, open := a.pending, a.sessions > 0
		a.mu.Unlock()
		if pending {
			if d := a.every - a.now().Sub(last); d > 0 && !last.IsZero() {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			last = a.now()
			a.send(ctx)
			continue
		}
		var beat <-chan time.Time
		var t *time.Timer
		if open && a.heartbeat > 0 {
			t = time.NewTimer(a.heartbeat)
			beat = t.C
		}
		select {
		case <-ctx.Done():
		case <-a.wake:
		case <-beat:
			a.mu.Lock()
			a.changed, a.pending = a.now(), true
			a.mu.Unlock()
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// send reports the current count; it stays pending when the report fails.
func (a *activity) send(ctx context.Context) {
	if a.rep == nil {
		a.mu.Lock()
		a.pending = false
		a.mu.Unlock()
		return
	}
	a.mu.Lock()
	n, at := a.sessions, a.changed
	a.pending = false
	a.mu.Unlock()
	if err := a.rep.report(ctx, n, at); err != nil {
		a.log.Warn("activity report failed", "err", err)
		a.mu.Lock()
		a.pending = true
		a.mu.Unlock()
	}
}

// final reports that no session is open, now, whatever the period: the
// facade is stopping.
func (a *activity) final(ctx context.Context) {
	a.mu.Lock()
	a.sessions, a.changed = 0, a.now()
	a.mu.Unlock()
	a.send(ctx)
}

// statusReporter applies the pod's own entry of the AgentRuntime's
// status.facadeReports through the API server with the pod's
// ServiceAccount token, which the agent's facade Role lets read and patch
// its own AgentRuntime's status and nothing else. The apply's field
// manager is omnia-facade/<pod>: each pod owns its entry, so replicas
// never overwrite each other's counts; the controller sums them.
type statusReporter struct {
	url    string
	agent  string
	ns     string
	pod    string
	token  string
	client *http.Client
}

// serviceAccountDir is where the kubelet mounts the pod's token
// (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inClusterReporter reads the pod's API server address, CA and token.
func inClusterReporter(agent, ns, pod string) (*statusReporter, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" || agent == "" || ns == "" || pod == "" {
		return nil, fmt.Errorf("not in a cluster (KUBERNETES_SERVICE_HOST/PORT, OMNIA_AGENT_NAME, OMNIA_NAMESPACE, POD_NAME)")
	}
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return newStatusReporter("https://"+net.JoinHostPort(host, port), agent, ns, pod, string(bytes.TrimSpace(token)), &http.Client{Transport: tr, Timeout: 10 * time.Second}), nil
}

func newStatusReporter(base, agent, ns, pod, token string, c *http.Client) *statusReporter {
	q := url.Values{"fieldManager": {fieldManagerPrefix + pod}, "force": {"true"}}
	return &statusReporter{url: fmt.Sprintf("%s/apis/omnia.altairalabs.ai/v1alpha1/namespaces/%s/agentruntimes/%s/status?%s", base, ns, agent, q.Encode()),
		agent: agent, ns: ns, pod: pod, token: token, client: c}
}

// fieldManagerPrefix starts a facade's field manager; the pod name
// follows (services/omnia-controllers internal/agentruntime
// FacadeFieldManager).
const fieldManagerPrefix = "omnia-facade/"

// report applies the pod's entry of status.facadeReports: its open
// sessions and the time of the last change. The apply is forced: no one
// else writes this entry, and a conflict would only delay the report.
func (s *statusReporter) report(ctx context.Context, sessions int, at time.Time) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": "omnia.altairalabs.ai/v1alpha1",
		"kind":       "AgentRuntime",
		"metadata":   map[string]any{"name": s.agent, "namespace": s.ns},
		"status": map[string]any{"facadeReports": []map[string]any{{
			"pod": s.pod, "activeSessions": sessions, "lastActivityTime": at.UTC().Format(time.RFC3339)}}},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	// JSON is YAML: the apply patch type takes it as it is.
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("apply AgentRuntime status report: HTTP %d", resp.StatusCode)
	}
	return nil
}
