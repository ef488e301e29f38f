package observability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/tests/internal/stack"
)

// scrapeInterval is short so that a few seconds after the scenario every
// rate() has samples; the queries' $__rate_interval becomes rateWindow.
const (
	scrapeInterval = time.Second
	rateWindow     = "1m"
)

// prometheus is a running Prometheus server scraping the services.
type prometheus struct {
	proc *stack.Process
	api  promv1.API
	url  string
	log  string
}

// binary returns the path of a Prometheus program: the environment
// variable env when set, else name on PATH.
func binary(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found: run `make prometheus` (Debian's prometheus package) or set %s", name, env)
	}
	return p, nil
}

// rulesFiles are the rule files the repository ships.
func rulesFiles() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(suite.Env.RepoRoot, "deploy", "prometheus", "*.rules.yaml"))
	if err == nil && len(files) == 0 {
		err = errors.New("no rule files in deploy/prometheus")
	}
	return files, err
}

// startPrometheus writes a configuration scraping targets (job → address)
// every scrapeInterval, with the repository's rule files, and starts the
// server on a free loopback address in dir.
func startPrometheus(ctx context.Context, dir string, targets map[string]string) (*prometheus, error) {
	bin, err := binary("PROMETHEUS_BIN", "prometheus")
	if err != nil {
		return nil, err
	}
	rules, err := rulesFiles()
	if err != nil {
		return nil, err
	}
	jobs := make([]string, 0, len(targets))
	for job := range targets {
		jobs = append(jobs, job)
	}
	sort.Strings(jobs)
	var scrape []map[string]any
	for _, job := range jobs {
		// honor_labels: the services' own namespace label (an Agent's or
		// an Omnia object's namespace) wins, as the charts' ServiceMonitors
		// configure it.
		scrape = append(scrape, map[string]any{"job_name": job, "honor_labels": true,
			"static_configs": []map[string]any{{"targets": []string{targets[job]}}}})
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global": map[string]any{"scrape_interval": scrapeInterval.String(), "scrape_timeout": scrapeInterval.String(),
			"evaluation_interval": scrapeInterval.String()},
		"rule_files":     rules,
		"scrape_configs": scrape,
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	addrs, err := stack.FreeAddrs(1)
	if err != nil {
		return nil, err
	}
	p := &prometheus{url: "http://" + addrs[0], log: filepath.Join(dir, "prometheus.log")}
	if p.proc, err = stack.StartProcess(ctx, p.log, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addrs[0], "--log.level=warn"); err != nil {
		return nil, err
	}
	client, err := promapi.NewClient(promapi.Config{Address: p.url})
	if err != nil {
		p.stop()
		return nil, err
	}
	p.api = promv1.NewAPI(client)
	if err := p.waitReady(ctx); err != nil {
		stack.DumpLog("prometheus", p.log, 40)
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitReady waits for /-/ready.
func (p *prometheus) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		select {
		case <-p.proc.Done():
			return errors.New("prometheus exited before it was ready")
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready at %s after 30s (last error: %w)", p.url, err)
		}
	}
}

func (p *prometheus) stop() { p.proc.StopWithin(10 * time.Second) }

// substitute replaces the Grafana variables of a panel's query with what
// the dashboards would send with every value selected.
func substitute(expr string) string {
	return allValues(strings.NewReplacer(
		"$__rate_interval", rateWindow, "${__rate_interval}", rateWindow,
		"$__interval", "15s", "${__interval}", "15s",
		"$__range", "1h", "${__range}", "1h",
	).Replace(expr))
}
