package observability

import (
	"context"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// TestDashboardsAndRulesOnARealPrometheus runs the scenario while
// Prometheus scrapes the four services, then holds every dashboard panel
// and alert rule to the data it collected.
func TestDashboardsAndRulesOnARealPrometheus(t *testing.T) {
	begin := time.Now()
	// The namespaces are the whole test's: deleting them would delete the
	// Omnia objects, and with them their series, before the queries.
	t.Run("scenario", func(outer *testing.T) {
		for name, f := range map[string]func(*testing.T, string){
			"the demo's Job runs": jobRuns, "a batch run": batchRun, "a realtime session": realtimeRun, "an Omnia AgentRuntime": omniaRuntime,
		} {
			ns := suite.Env.Namespace(t)
			outer.Run(name, func(t *testing.T) {
				t.Parallel()
				f(t, ns)
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A series born at the scenario's end (a counter's first increment)
	// needs two samples before rate() returns it: wait for two scrapes.
	scrapedAfter(ctx, t, time.Now())
	scrapedAfter(ctx, t, time.Now())

	t.Run("every metric name the dashboards and rules read is exported", func(t *testing.T) {
		names, _, _, err := prom.api.LabelValues(ctx, "__name__", nil, begin.Add(-time.Minute), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		exported := map[string]bool{}
		for _, n := range names {
			exported[string(n)] = true
		}
		missing := map[string][]string{}
		for _, q := range append(dashboardQueries(t), ruleQueries(t)...) {
			used, err := metricNames(q.expr)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			for _, n := range used {
				if !exported[n] {
					missing[n] = append(missing[n], q.where)
				}
			}
		}
		for n, where := range missing {
			t.Errorf("%s is read by %d queries but no service exported it:%s", n, len(where), join(where))
		}
	})

	t.Run("every dashboard panel returns a series", func(t *testing.T) {
		data := map[string]bool{}
		for _, q := range dashboardQueries(t) {
			if _, ok := data[q.panel]; !ok {
				data[q.panel] = false
			}
			v, warnings, _, err := prom.api.Query(ctx, substitute(q.expr), time.Now())
			if err != nil {
				t.Errorf("%s: %q: %v", q.where, substitute(q.expr), err)
				continue
			}
			for _, w := range warnings {
				t.Logf("%s: warning %s", q.where, w)
			}
			if series(v) > 0 {
				data[q.panel] = true
			}
		}
		var empty []string
		with := 0
		for p, ok := range data {
			if ok {
				with++
			} else {
				empty = append(empty, p)
			}
		}
		sort.Strings(empty)
		t.Log(summary(with, len(data)))
		if len(empty) > 0 {
			t.Errorf("%d panels returned no series:%s", len(empty), join(empty))
		}
	})

	t.Run("the server loads every rule and evaluates it without error", func(t *testing.T) {
		want := len(ruleQueries(t))
		deadline := time.Now().Add(30 * time.Second)
		for {
			rules, err := prom.api.Rules(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, ok, bad := 0, 0, []string{}
			for _, g := range rules.Groups {
				for _, r := range g.Rules {
					got++
					if a, isAlert := r.(promv1.AlertingRule); isAlert {
						switch a.Health {
						case promv1.RuleHealthGood:
							ok++
						case promv1.RuleHealthBad:
							bad = append(bad, a.Name+": "+a.LastError)
						}
					}
				}
			}
			if len(bad) > 0 {
				t.Fatalf("rules failing on the server:%s", join(bad))
			}
			if got == want && ok == want {
				t.Logf("%d alerting rules evaluated on the server", ok)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d rules loaded (want %d), %d evaluated healthy", got, want, ok)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	t.Run("promtool check rules", func(t *testing.T) {
		files, err := rulesFiles()
		if err != nil {
			t.Fatal(err)
		}
		promtool(t, append([]string{"check", "rules"}, files...)...)
	})

	t.Run("promtool test rules: every alert fires and resolves as its runbook says", func(t *testing.T) {
		tests, err := filepath.Glob(filepath.Join(suite.Env.RepoRoot, "deploy", "prometheus", "tests", "*.test.yaml"))
		if err != nil || len(tests) == 0 {
			t.Fatalf("no rule tests in deploy/prometheus/tests (%v)", err)
		}
		promtool(t, append([]string{"test", "rules"}, tests...)...)
	})
}

// scrapedAfter waits until Prometheus has scraped every target after at,
// so the queries see the scenario's last figures.
func scrapedAfter(ctx context.Context, t *testing.T, at time.Time) {
	t.Helper()
	for {
		v, _, _, err := prom.api.Query(ctx, "min(timestamp(up == 1)) and count(up == 1) == "+strconv.Itoa(len(targets)), time.Now())
		if err == nil {
			if vec, ok := v.(model.Vector); ok && len(vec) == 1 && float64(vec[0].Value) > float64(at.Unix()) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus did not scrape all %d targets after %s (last error %v, value %v)", len(targets), at, err, v)
		case <-time.After(scrapeInterval / 2):
		}
	}
}

// series counts what a query returned.
func series(v model.Value) int {
	switch v := v.(type) {
	case model.Vector:
		return len(v)
	case model.Matrix:
		return len(v)
	case *model.Scalar, *model.String:
		return 1
	}
	return 0
}

// promtool runs promtool with args and fails t with its output on error.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := binary("PROMTOOL_BIN", "promtool")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args[:2], err, out)
	}
	t.Logf("promtool %v:\n%s", args[:2], out)
}
