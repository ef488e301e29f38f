package dashboards

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

func all(t *testing.T) []Dashboard {
	t.Helper()
	ds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 {
		t.Fatal("no dashboards")
	}
	return ds
}

// units are the Grafana units a panel may have.
var units = map[string]bool{
	unitSeconds: true, unitReqPerSec: true, unitOpsPerSec: true, unitRatio: true,
	unitShort: true, unitBytes: true, unitNone: true, "percent": true,
}

func TestEveryPanelHasAUnitADescriptionAndQueries(t *testing.T) {
	for _, d := range all(t) {
		titles := map[string]bool{}
		for _, p := range d.Panels() {
			if p.Unit == "" || !units[p.Unit] {
				t.Errorf("%s: panel %q has unit %q", d.UID, p.Title, p.Unit)
			}
			// What it shows and what a bad value means: a sentence at least.
			if len(p.Description) < 40 {
				t.Errorf("%s: panel %q has no description worth the name: %q", d.UID, p.Title, p.Description)
			}
			if p.Title == "" || len(p.Exprs) == 0 {
				t.Errorf("%s: panel %q has no title or no query", d.UID, p.Title)
			}
			if p.Type != "timeseries" && p.Type != "stat" {
				t.Errorf("%s: panel %q is a %s", d.UID, p.Title, p.Type)
			}
			// Two panels of one row may share a title (a stat and its
			// time series); not within the same type.
			k := p.Type + "/" + p.Title
			if titles[k] {
				t.Errorf("%s: two %s panels are titled %q", d.UID, p.Type, p.Title)
			}
			titles[k] = true
		}
	}
}

func TestEveryDashboardHasTheCommonSettings(t *testing.T) {
	for _, d := range all(t) {
		m := d.Model
		if deref(m.Uid) != d.UID || deref(m.Title) != d.Title || d.Title == "" {
			t.Errorf("%s: uid %q title %q", d.UID, deref(m.Uid), deref(m.Title))
		}
		if !slices.Equal(m.Tags, []string{"agentplane"}) {
			t.Errorf("%s: tags %v", d.UID, m.Tags)
		}
		if deref(m.Refresh) != "30s" {
			t.Errorf("%s: refresh %q", d.UID, deref(m.Refresh))
		}
		if m.Time == nil || m.Time.From != "now-6h" || m.Time.To != "now" {
			t.Errorf("%s: time %+v", d.UID, m.Time)
		}
		vars := d.Variables()
		if len(vars) == 0 || vars[0] != (Variable{Name: "datasource", Type: "datasource", Query: "prometheus"}) {
			t.Errorf("%s: the first variable is not a prometheus datasource variable: %+v", d.UID, vars)
		}
		if !strings.HasPrefix(d.UID, "agentplane-") || len(d.UID) > 40 {
			t.Errorf("%s: a uid is agentplane-<name>, at most 40 characters", d.UID)
		}
		if !slices.Contains(d.Charts, Umbrella) {
			t.Errorf("%s: the umbrella chart does not ship it", d.UID)
		}
	}
}

func TestPanelIDsAreUniqueAndPanelsDoNotOverlap(t *testing.T) {
	for _, d := range all(t) {
		ids := map[uint32]bool{}
		type cell struct{ x, y uint32 }
		used := map[cell]string{}
		for _, p := range d.Model.Panels {
			var id uint32
			var title string
			var x, y, w, h uint32
			switch {
			case p.Panel != nil:
				id, title = deref(p.Panel.Id), deref(p.Panel.Title)
				g := p.Panel.GridPos
				x, y, w, h = g.X, g.Y, g.W, g.H
			case p.RowPanel != nil:
				id, title = p.RowPanel.Id, deref(p.RowPanel.Title)
				g := p.RowPanel.GridPos
				x, y, w, h = g.X, g.Y, g.W, g.H
			}
			if id == 0 || ids[id] {
				t.Errorf("%s: panel %q has id %d, not unique", d.UID, title, id)
			}
			ids[id] = true
			if x+w > 24 {
				t.Errorf("%s: panel %q is wider than the grid", d.UID, title)
			}
			for i := x; i < x+w; i++ {
				for j := y; j < y+h; j++ {
					if other, ok := used[cell{i, j}]; ok {
						t.Errorf("%s: panels %q and %q overlap", d.UID, other, title)
						goto next
					}
					used[cell{i, j}] = title
				}
			}
		next:
		}
	}
}

func TestUIDsAndTitlesAreUnique(t *testing.T) {
	uids, titles := map[string]bool{}, map[string]bool{}
	for _, d := range all(t) {
		if uids[d.UID] || titles[d.Title] {
			t.Errorf("dashboard %s (%q) is not unique", d.UID, d.Title)
		}
		uids[d.UID], titles[d.Title] = true, true
	}
}

// TestEveryServiceChartShipsItsDashboard: each service's chart has its
// own dashboard; the umbrella has them all.
func TestEveryServiceChartShipsItsDashboard(t *testing.T) {
	byChart := map[string][]string{}
	for _, d := range all(t) {
		for _, c := range d.Charts {
			byChart[c] = append(byChart[c], d.UID)
		}
	}
	for _, c := range []string{AgentController, BatchPoller, RealtimeGateway, OmniaControllers} {
		if !slices.Equal(byChart[c], []string{"agentplane-" + c}) {
			t.Errorf("chart %s ships %v, want its own dashboard", c, byChart[c])
		}
	}
	if len(byChart[Umbrella]) != len(all(t)) {
		t.Errorf("the umbrella ships %v, want every dashboard", byChart[Umbrella])
	}
}

func TestJSONIsDeterministic(t *testing.T) {
	a, b := all(t), all(t)
	for i := range a {
		ja, err := a[i].JSON()
		if err != nil {
			t.Fatal(err)
		}
		jb, err := b[i].JSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := a[i].JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ja, jb) || !bytes.Equal(ja, again) {
			t.Errorf("%s: two renderings differ", a[i].UID)
		}
		if !bytes.HasSuffix(ja, []byte("}\n")) {
			t.Errorf("%s: the file does not end in a newline", a[i].UID)
		}
		// Keys come out sorted: decoding and encoding again changes nothing.
		var v any
		if err := json.Unmarshal(ja, &v); err != nil {
			t.Fatalf("%s: not JSON: %v", a[i].UID, err)
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), ja) {
			t.Errorf("%s: keys are not sorted", a[i].UID)
		}
	}
}

// repoRoot is the directory holding go.work, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the package")
		}
		dir = parent
	}
}

// TestCommittedFilesAreTheGeneratedOnes: deploy/dashboards and each
// chart's files/dashboards hold exactly what the generator writes (`make
// generate`, or go run ./tools/dashboards -out deploy/dashboards -helm helm).
func TestCommittedFilesAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	want := map[string]map[string][]byte{filepath.Join("deploy", "dashboards"): {}}
	for _, d := range all(t) {
		js, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Join("deploy", "dashboards")][d.FileName()] = js
		for _, c := range d.Charts {
			dir := filepath.Join("helm", c, "files", "dashboards")
			if want[dir] == nil {
				want[dir] = map[string][]byte{}
			}
			want[dir][d.FileName()] = js
		}
	}
	const regenerate = "run make generate, or go run ./tools/dashboards -out deploy/dashboards -helm helm"
	dirs := make([]string, 0, len(want))
	for dir := range want {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		files := want[dir]
		got, err := filepath.Glob(filepath.Join(root, dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range got {
			if _, ok := files[filepath.Base(f)]; !ok {
				t.Errorf("%s/%s is not generated (%s)", dir, filepath.Base(f), regenerate)
			}
		}
		for name, js := range files {
			b, err := os.ReadFile(filepath.Join(root, dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s/%s is missing (%s)", dir, name, regenerate)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, js) {
				t.Errorf("%s/%s differs from what the generator writes (%s)", dir, name, regenerate)
			}
		}
	}
}

var promql = parser.NewParser(parser.Options{})

// variableRef is a Grafana variable in an expression.
var variableRef = regexp.MustCompile(`\$\{?(\w+)`)

// TestQueriesParseAndUseOnlyKnownMetrics: every expression, its variables
// replaced as a test's Prometheus needs them, is valid PromQL; every series
// it selects is a metric of the Inventory (a histogram through its
// _bucket, _sum or _count series); every range is $__rate_interval; every
// variable it uses is the dashboard's.
func TestQueriesParseAndUseOnlyKnownMetrics(t *testing.T) {
	used := map[string]bool{}
	for _, d := range all(t) {
		defined := map[string]bool{"__rate_interval": true}
		for _, v := range d.Variables() {
			defined[v.Name] = true
		}
		for _, p := range d.Panels() {
			for _, expr := range p.Exprs {
				for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
					if !defined[m[1]] || m[1] == "datasource" {
						t.Errorf("%s / %s: $%s is not a variable of the dashboard: %s", d.UID, p.Title, m[1], expr)
					}
				}
				for _, name := range checkExpr(t, d.UID+" / "+p.Title, expr) {
					used[name] = true
				}
			}
		}
		// The query variables' label_values(<selector>, <label>): the
		// selector is PromQL too.
		for _, v := range d.Variables() {
			if v.Type != "query" {
				continue
			}
			sel, ok := strings.CutPrefix(v.Query, "label_values(")
			i := strings.LastIndex(sel, ",")
			if !ok || i < 0 || !strings.HasSuffix(sel, ")") {
				t.Errorf("%s: variable %s: %q is not label_values(<selector>, <label>)", d.UID, v.Name, v.Query)
				continue
			}
			for _, name := range checkExpr(t, d.UID+" / $"+v.Name, sel[:i]) {
				used[name] = true
			}
		}
	}
	// Each service's own metrics are on a dashboard (the shared ones may
	// be missing from some).
	var unused []string
	for name := range Inventory {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("no dashboard shows %v", unused)
	}
}

// checkExpr parses an expression with its variables expanded and returns
// the Inventory metrics it selects.
func checkExpr(t *testing.T, where, expr string) []string {
	t.Helper()
	expanded := ExpandVariables(expr)
	if strings.Contains(expanded, "$") {
		t.Errorf("%s: a variable is left after expansion: %s", where, expanded)
	}
	node, err := promql.ParseExpr(expanded)
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, expanded)
		return nil
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch s := n.(type) {
		case *parser.VectorSelector:
			name, ok := InventoryMetric(s.Name)
			if !ok {
				t.Errorf("%s: %q is not a metric of the inventory: %s", where, s.Name, expr)
			}
			names = append(names, name)
		case *parser.MatrixSelector:
			if s.Range != time.Minute {
				t.Errorf("%s: a range of %s, not $__rate_interval: %s", where, s.Range, expr)
			}
		case *parser.SubqueryExpr:
			t.Errorf("%s: a subquery: %s", where, expr)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: selects no metric: %s", where, expr)
	}
	return names
}

// TestHistogramsAreQueriedThroughTheirBuckets: a quantile of a histogram
// aggregates its _bucket series by le.
func TestHistogramsAreQueriedThroughTheirBuckets(t *testing.T) {
	for _, d := range all(t) {
		for _, p := range d.Panels() {
			for _, expr := range p.Exprs {
				node, err := promql.ParseExpr(ExpandVariables(expr))
				if err != nil {
					continue // reported by TestQueriesParseAndUseOnlyKnownMetrics
				}
				parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
					call, ok := n.(*parser.Call)
					if !ok || call.Func.Name != "histogram_quantile" {
						return nil
					}
					agg, ok := call.Args[1].(*parser.AggregateExpr)
					if !ok || agg.Op != parser.SUM || !slices.Contains(agg.Grouping, "le") || agg.Without {
						t.Errorf("%s / %s: histogram_quantile over something else than sum by (le, ...): %s", d.UID, p.Title, expr)
						return nil
					}
					parser.Inspect(agg.Expr, func(m parser.Node, _ []parser.Node) error {
						if vs, ok := m.(*parser.VectorSelector); ok && vs.Name != "agentplane_build_info" && !strings.HasSuffix(vs.Name, "_bucket") {
							t.Errorf("%s / %s: histogram_quantile over %s: %s", d.UID, p.Title, vs.Name, expr)
						}
						return nil
					})
					return nil
				})
			}
		}
	}
}

func TestInventory(t *testing.T) {
	for name, m := range Inventory {
		if m.Type != Counter && m.Type != Gauge && m.Type != Histogram {
			t.Errorf("%s: type %q", name, m.Type)
		}
		if (m.Type == Counter) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a counter's name ends in _total, and only a counter's", name)
		}
		if len(m.Services) == 0 {
			t.Errorf("%s: no service", name)
		}
	}
	for series, want := range map[string]bool{
		"controller_run_queue_seconds_bucket": true,
		"controller_run_queue_seconds_count":  true,
		"controller_run_queue_seconds":        true,
		"controller_agents":                   true,
		"controller_agents_bucket":            false,
		"controller_agent":                    false,
	} {
		if Known(series) != want {
			t.Errorf("Known(%q) = %v", series, !want)
		}
	}
}

func TestExpandVariables(t *testing.T) {
	got := ExpandVariables(`rate(x{namespace=~"$namespace", station=~"${station}", service=~"$service", job=~"$job"}[$__rate_interval])`)
	want := `rate(x{namespace=~".*", station=~".*", service=~".*", job=~".*"}[1m])`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
