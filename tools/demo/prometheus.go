package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// prometheusAddr is where the demo's Prometheus serves its UI and API.
const prometheusAddr = "127.0.0.1:9090"

// scrapeTarget is one job Prometheus scrapes: a service's metrics
// Service, by its ClusterIP address.
type scrapeTarget struct{ job, addr string }

// startPrometheus runs a Prometheus server (Debian's prometheus package;
// `make prometheus` installs it) on the host that scrapes each target
// every 2 s and evaluates the services' alert rules. The demo goes on
// without it when the binary is missing or its port is taken: it says why
// and returns nil.
func startPrometheus(ctx context.Context, state, repo string, targets []scrapeTarget) promv1.API {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		fmt.Println("  no prometheus binary: skipping metrics (make prometheus installs Debian's package)")
		return nil
	}
	if err := checkPorts([]port{{prometheusAddr, "Prometheus", "another Prometheus"}}); err != nil {
		fmt.Printf("  skipping Prometheus: %v\n", err)
		return nil
	}
	dir := filepath.Join(state, "prometheus")
	var jobs []map[string]any
	var rules []string
	for _, t := range targets {
		jobs = append(jobs, map[string]any{"job_name": t.job, "honor_labels": true,
			"static_configs": []map[string]any{{"targets": []string{t.addr}}}})
		if r := filepath.Join(repo, "deploy", "prometheus", t.job+".rules.yaml"); fileExists(r) {
			rules = append(rules, r)
		}
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "2s", "evaluation_interval": "2s"},
		"rule_files":     rules,
		"scrape_configs": jobs,
	})
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644)
	}
	if err == nil {
		_, err = spawn(state, "prometheus", bin, []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + prometheusAddr, "--log.level=warn"}, nil)
	}
	if err == nil {
		ready := "http://" + prometheusAddr + "/-/ready"
		err = newWaiter(300*time.Millisecond).wait(ctx, "Prometheus to be ready ("+ready+")", 30*time.Second, httpOK(ready))
	}
	if err != nil {
		fmt.Printf("  Prometheus did not start (log %s): %v; going on without it\n", filepath.Join(state, "logs", "prometheus.log"), err)
		return nil
	}
	client, err := promapi.NewClient(promapi.Config{Address: "http://" + prometheusAddr})
	if err != nil {
		fmt.Printf("  Prometheus client: %v; going on without it\n", err)
		return nil
	}
	return promv1.NewAPI(client)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// figure is one live figure the demo reads back from Prometheus.
type figure struct {
	what, query string
	unit        func(float64) string
}

var figures = []figure{
	{"runs finished, by phase", `sum by (phase) (controller_runs_completed_total)`, count},
	{"run failures, by kind", `sum by (kind) (controller_run_failures_total) > 0`, count},
	{"queue time p50 (creation to Job)", `histogram_quantile(0.5, sum by (le) (controller_run_queue_seconds_bucket))`, seconds},
	{"run duration p99", `histogram_quantile(0.99, sum by (le) (controller_run_duration_seconds_bucket))`, seconds},
	{"the controller is leader", `max(controller_is_leader)`, count},
	{"alerts firing", `count(ALERTS{alertstate="firing"}) or vector(0)`, count},
}

func count(v float64) string { return fmt.Sprintf("%g", v) }
func seconds(v float64) string {
	return (time.Duration(v * float64(time.Second))).Round(10 * time.Millisecond).String()
}

// showFigures waits for a scrape after the runs ended and prints figures
// read back through Prometheus's query API.
func showFigures(ctx context.Context, api promv1.API) {
	// The runs have ended: a scrape that starts from now on sees their
	// last counts.
	after := float64(time.Now().UnixMilli()) / 1000
	// Without that scrape the figures are a little behind; they are shown
	// all the same.
	_ = newWaiter(500*time.Millisecond).wait(ctx, "Prometheus to scrape the agent-controller once more", 20*time.Second,
		func(ctx context.Context) error {
			v, _, _, err := api.Query(ctx, `timestamp(up{job="agent-controller"} == 1)`, time.Now())
			if err != nil {
				return err
			}
			if vec, ok := v.(model.Vector); ok && len(vec) == 1 && float64(vec[0].Value) > after {
				return nil
			}
			return errors.New("no scrape since the runs ended")
		})
	fmt.Printf("\nRead back from Prometheus (http://%s):\n\n", prometheusAddr)
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	for _, f := range figures {
		v, _, _, err := api.Query(ctx, f.query, time.Now())
		if err != nil {
			fmt.Fprintf(w, "  %s\t(query failed: %v)\n", f.what, err)
			continue
		}
		fmt.Fprintf(w, "  %s\t%s\n", f.what, render(v, f.unit))
	}
	_ = w.Flush()
}

// render prints a vector as "<label value> <value>" pairs (every figure
// aggregates by at most one label), or its single value.
func render(v model.Value, unit func(float64) string) string {
	vec, ok := v.(model.Vector)
	if !ok || len(vec) == 0 {
		return "(no data yet)"
	}
	parts := make([]string, 0, len(vec))
	for _, s := range vec {
		part := unit(float64(s.Value))
		for _, value := range s.Metric {
			part = string(value) + " " + part
		}
		parts = append(parts, part)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
