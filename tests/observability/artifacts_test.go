package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// query is one PromQL expression the project ships: a dashboard panel's
// target or an alert rule's expression.
type query struct {
	// where names it in failures: "<dashboard>: <panel>" or "<file>: <alert>".
	where string
	// panel groups a panel's targets: a panel has data when one of them
	// returns a series. Empty for rules.
	panel string
	expr  string
}

// panel is the part of a Grafana panel the tests read. Rows nest panels.
type panel struct {
	ID      int      `json:"id"`
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Panels  []panel  `json:"panels"`
	Targets []target `json:"targets"`
}

type target struct {
	Expr string `json:"expr"`
}

// dashboardQueries reads every panel target of deploy/dashboards/*.json.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(suite.Env.RepoRoot, "deploy", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in deploy/dashboards (%v)", err)
	}
	var out []query
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string  `json:"uid"`
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				for _, tg := range p.Targets {
					if tg.Expr != "" {
						// A dashboard may show one figure twice (a stat
						// and its graph): the id tells them apart.
						name := fmt.Sprintf("%s: %s (#%d)", d.UID, p.Title, p.ID)
						out = append(out, query{where: name, panel: name, expr: tg.Expr})
					}
				}
			}
		}
		walk(d.Panels)
	}
	return out
}

// ruleQueries reads every rule expression of deploy/prometheus/*.rules.yaml.
func ruleQueries(t *testing.T) []query {
	t.Helper()
	files, err := rulesFiles()
	if err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Rules []struct {
					Alert  string `json:"alert"`
					Record string `json:"record"`
					Expr   string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				out = append(out, query{where: filepath.Base(f) + ": " + r.Alert + r.Record, expr: r.Expr})
			}
		}
	}
	return out
}

// variable is a Grafana template variable reference, $name or ${name} or
// ${name:format}; the built-ins ($__...) are replaced before.
var variable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// allValues replaces each template variable with the regular expression
// Grafana sends when every value is selected.
func allValues(expr string) string { return variable.ReplaceAllString(expr, ".*") }

// promQL is Prometheus's own parser with its default functions.
var promQL = parser.NewParser(parser.Options{})

// metricNames parses expr (its variables substituted) with Prometheus's
// own parser and returns the metric names its selectors read.
func metricNames(expr string) ([]string, error) {
	e, err := promQL.ParseExpr(substitute(expr))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			seen[vs.Name] = true
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// TestEveryShippedQueryParses needs no server: each dashboard query and
// rule expression, its variables substituted, parses, and a variable is
// only used in a regular-expression matcher (=~ or !~), where Grafana's
// "All" value works.
func TestEveryShippedQueryParses(t *testing.T) {
	qs := append(dashboardQueries(t), ruleQueries(t)...)
	equalVar := regexp.MustCompile(`[^=!]=\s*"\$`)
	for _, q := range qs {
		if _, err := metricNames(q.expr); err != nil {
			t.Errorf("%s: %q does not parse: %v", q.where, q.expr, err)
		}
		if equalVar.MatchString(q.expr) {
			t.Errorf("%s: %q matches a template variable with =; use =~ so that All works", q.where, q.expr)
		}
	}
	t.Logf("%d dashboard and rule expressions parse", len(qs))
}

// summary formats a count of panels with data.
func summary(withData, all int) string {
	return fmt.Sprintf("%d of %d panels returned data", withData, all)
}

// join lists names one per line for a failure message.
func join(names []string) string { return "\n  " + strings.Join(names, "\n  ") }
