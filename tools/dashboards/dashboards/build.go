// Package dashboards defines agentplane's Grafana dashboards in Go, with
// the Grafana Foundation SDK, and renders them as the JSON Grafana imports.
//
// All returns every dashboard; Dashboard.JSON is its file, byte for byte
// the same on every run (keys sorted, panels and ids in a fixed order);
// Dashboard.Panels lists each panel's title, unit, description and PromQL
// expressions, with the Grafana variables left in (ExpandVariables
// replaces them), for tests that check the queries. Every metric a query
// names is in Inventory.
//
// The queries assume a Prometheus that scrapes each service's /metrics
// with honor_labels (the charts' ServiceMonitors set honorLabels: true):
// the services export a namespace label that means the namespace of the
// Agent or object, as kube-state-metrics does. Metrics that more than one
// service exports (the Go and process collectors, client-go's work queue
// and REST client, the gRPC server's) are attributed to a service by
// joining on the scrape target, job and instance, with
// agentplane_build_info{service="..."}, which every service exports; so
// they work whatever the scrape jobs are named, one job per service or a
// single job for every pod.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Umbrella is the umbrella chart, which ships every dashboard.
const Umbrella = "agentplane"

// Dashboard is one generated dashboard.
type Dashboard struct {
	// UID is the dashboard's uid, also its file name without ".json".
	UID string
	// Title is the dashboard's title.
	Title string
	// Charts are the Helm charts whose files/dashboards hold it: the
	// service's own chart, if any, and the umbrella.
	Charts []string
	// Model is the dashboard as the SDK built it (the classic JSON model).
	Model dashboard.Dashboard //nolint:staticcheck // v1 on purpose: what Grafana's dashboard sidecar reads.
}

// Panel is one panel of a dashboard, as the tests see it.
type Panel struct {
	// Dashboard is the uid of the dashboard holding the panel.
	Dashboard string
	// Title, Type (timeseries, stat), Unit and Description are the panel's.
	Title, Type, Unit, Description string
	// Exprs are the PromQL expressions of its queries, in order, with the
	// Grafana variables ($__rate_interval, $namespace, ...) in them.
	Exprs []string
}

// Variable is one template variable of a dashboard.
type Variable struct {
	// Name and Type (datasource, query) are the variable's.
	Name, Type string
	// Query is the datasource variable's plugin type (prometheus), or the
	// query variable's query (label_values(...)).
	Query string
}

// FileName is the name of the dashboard's JSON file.
func (d Dashboard) FileName() string { return d.UID + ".json" }

// JSON is the dashboard as Grafana imports it: indented, keys sorted, no
// HTML escaping, a final newline. Two calls give the same bytes.
func (d Dashboard) JSON() ([]byte, error) {
	raw, err := json.Marshal(d.Model)
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	// Through a generic value, so that every object's keys come out
	// sorted, maps and structs alike; numbers are kept as written.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return out.Bytes(), nil
}

// Panels lists the dashboard's panels (not its rows), top to bottom.
func (d Dashboard) Panels() []Panel {
	var out []Panel
	add := func(p dashboard.Panel) {
		pp := Panel{Dashboard: d.UID, Type: p.Type, Title: deref(p.Title), Description: deref(p.Description)}
		if p.FieldConfig != nil {
			pp.Unit = deref(p.FieldConfig.Defaults.Unit)
		}
		for _, t := range p.Targets {
			switch q := t.(type) {
			case prometheus.Dataquery:
				pp.Exprs = append(pp.Exprs, q.Expr)
			case *prometheus.Dataquery:
				pp.Exprs = append(pp.Exprs, q.Expr)
			}
		}
		out = append(out, pp)
	}
	for _, p := range d.Model.Panels {
		if p.Panel != nil {
			add(*p.Panel)
		}
		if p.RowPanel != nil {
			for _, rp := range p.RowPanel.Panels {
				add(rp)
			}
		}
	}
	return out
}

// Variables lists the dashboard's template variables, in order.
func (d Dashboard) Variables() []Variable {
	var out []Variable
	for _, v := range d.Model.Templating.List {
		vv := Variable{Name: v.Name, Type: string(v.Type)}
		if v.Query != nil {
			vv.Query = deref(v.Query.String)
		}
		out = append(out, vv)
	}
	return out
}

// testValues are what ExpandVariables puts in place of each variable.
var testValues = map[string]string{
	"__rate_interval": "1m",
	"namespace":       ".*",
	"station":         ".*",
	"service":         ".*",
	"job":             ".*",
}

// ExpandVariables replaces the Grafana variables of an expression with
// values that select everything, as a test's Prometheus query needs them:
// $__rate_interval becomes 1m, $namespace, $station, $service and $job
// become .* (the dashboards use them only in =~ matchers). $datasource
// never appears in an expression.
func ExpandVariables(expr string) string {
	names := make([]string, 0, len(testValues))
	for n := range testValues {
		names = append(names, n)
	}
	// Longest first, so that no name is replaced inside a longer one.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		expr = strings.ReplaceAll(expr, "${"+n+"}", testValues[n])
		expr = strings.ReplaceAll(expr, "$"+n, testValues[n])
	}
	return expr
}

// All builds every dashboard, in a fixed order.
func All() ([]Dashboard, error) {
	specs := []board{
		overview(),
		agentControllerBoard(),
		batchPollerBoard(),
		realtimeGatewayBoard(),
		eventPathBoard(),
		omniaControllersBoard(),
	}
	out := make([]Dashboard, 0, len(specs))
	for _, s := range specs {
		d, err := s.build()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// board is a dashboard's definition: its variables and its sections, each
// a row and the panels under it.
type board struct {
	uid, title, description string
	// service is the chart the dashboard belongs to; empty for the
	// dashboards that span services, which only the umbrella ships.
	service  string
	vars     []cog.Builder[dashboard.VariableModel]
	sections []section
}

type section struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

func (b board) build() (Dashboard, error) {
	// The classic (v1) JSON model, which the SDK marks deprecated in favour
	// of v2: Grafana's dashboard sidecar and file provisioning read v1.
	db := dashboard.NewDashboardBuilder(b.title) //nolint:staticcheck // v1 on purpose, see above.
	db.Uid(b.uid).
		Description(b.description).
		Tags([]string{"agentplane"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Editable().
		WithVariable(datasourceVariable())
	for _, v := range b.vars {
		db.WithVariable(v)
	}
	for _, s := range b.sections {
		db.WithRow(dashboard.NewRowBuilder(s.title))
		for _, p := range s.panels {
			db.WithPanel(p)
		}
	}
	model, err := db.Build()
	if err != nil {
		return Dashboard{}, fmt.Errorf("dashboard %s: %w", b.uid, err)
	}
	// Grafana wants a panel id unique within the dashboard: number rows
	// and panels in order.
	id := uint32(0)
	for i := range model.Panels {
		id++
		if p := model.Panels[i].Panel; p != nil {
			p.Id = ptr(id)
		}
		if r := model.Panels[i].RowPanel; r != nil {
			r.Id = id
		}
	}
	charts := []string{Umbrella}
	if b.service != "" {
		charts = []string{b.service, Umbrella}
	}
	return Dashboard{UID: b.uid, Title: b.title, Charts: charts, Model: model}, nil
}

// The data source every panel and variable queries: the dashboard's
// datasource variable.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Description("The Prometheus that scrapes the agentplane services.").
		Type("prometheus").
		Regex("")
}

// queryVariable is a multi-value variable, All by default, over the values
// of a label: label_values(<series>, <label>).
func queryVariable(name, label, series, description string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", series, label)
	return dashboard.NewQueryVariableBuilder(name).
		Label(strings.ToUpper(name[:1]) + name[1:]).
		Description(description).
		Query(dashboard.StringOrMap{String: ptr(q)}).
		Definition(q).
		Datasource(datasource).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Selected: ptr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// The units the panels use (Grafana's unit ids).
const (
	unitSeconds   = "s"
	unitReqPerSec = "reqps"
	unitOpsPerSec = "ops"
	unitRatio     = "percentunit"
	unitShort     = "short"
	unitBytes     = "bytes"
	unitNone      = "none"
)

// query is one PromQL query of a panel and its legend.
type query struct {
	expr, legend string
}

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

func targets(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(qs))
	for i, x := range qs {
		b := prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Datasource(datasource).
			Expr(x.expr).
			Range()
		if x.legend != "" {
			b.LegendFormat(x.legend)
		}
		out = append(out, b)
	}
	return out
}

// timeSeries is a time series panel, a third of the width; every panel
// says what it shows and what a bad value means (description) and has a
// unit.
func timeSeries(title, unit, description string, qs ...query) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasource).
		Targets(targets(qs)).
		Span(8).
		Height(8).
		Min(0).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// singleStat is a stat panel showing the last value, a quarter of the
// width.
func singleStat(title, unit, description string, qs ...query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasource).
		Targets(targets(qs)).
		Span(6).
		Height(4).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeArea).
		TextMode(common.BigValueTextModeAuto).
		JustifyMode(common.BigValueJustifyModeAuto).
		Orientation(common.VizOrientationAuto).
		// One color unless the panel sets thresholds of its own: Grafana's
		// default turns a value red from 80, whatever it counts.
		Thresholds(thresholds("green")).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
}

// step is one threshold: from value up, the color.
type step struct {
	from  *float64
	color string
}

func from(v float64, color string) step { return step{from: &v, color: color} }

// thresholds starts at base (the color below every step) and changes color
// at each step.
func thresholds(base string, steps ...step) *dashboard.ThresholdsConfigBuilder {
	all := []dashboard.Threshold{{Value: nil, Color: base}}
	for _, s := range steps {
		all = append(all, dashboard.Threshold{Value: s.from, Color: s.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(all)
}

// The PromQL building blocks.

// rate is rate(<metric><selector>[$__rate_interval]).
func rate(metric, selector string) string {
	return fmt.Sprintf("rate(%s%s[$__rate_interval])", metric, selector)
}

// of attributes a shared metric (work queue, REST client, gRPC server, Go
// and process collectors) to one service: the series of the scrape
// targets whose agentplane_build_info names that service.
func of(service, expr string) string {
	return fmt.Sprintf(`%s * on (job, instance) group_left () agentplane_build_info{service=%q}`, expr, service)
}

// quantile is histogram_quantile(phi, sum by (le, by...) (rate(<hist>_bucket<sel>[...]))),
// the rate attributed to service when service is not empty.
func quantile(phi float64, histogram, selector, service string, by ...string) string {
	r := rate(histogram+"_bucket", selector)
	if service != "" {
		r = of(service, r)
	}
	return fmt.Sprintf("histogram_quantile(%g, sum by (%s) (%s))", phi, strings.Join(append([]string{"le"}, by...), ", "), r)
}

// medianAndP99 is the two queries of a latency panel: the median and the
// 99th percentile of histogram (see quantile), legends "p50" and "p99"
// followed by the by labels.
func medianAndP99(histogram, service string, by ...string) []query {
	legend := ""
	for _, l := range by {
		legend += " {{" + l + "}}"
	}
	return []query{
		q(quantile(0.5, histogram, "", service, by...), "p50"+legend),
		q(quantile(0.99, histogram, "", service, by...), "p99"+legend),
	}
}

// sumBy is sum by (labels) (expr), or sum (expr) without labels.
func sumBy(expr string, labels ...string) string {
	if len(labels) == 0 {
		return fmt.Sprintf("sum (%s)", expr)
	}
	return fmt.Sprintf("sum by (%s) (%s)", strings.Join(labels, ", "), expr)
}

// leaderOnly keeps the series of the agent-controller replica that
// reconciles: a standby's gauges are not the platform's state.
func leaderOnly(expr string) string {
	return fmt.Sprintf("%s * on (job, instance) group_left () (controller_is_leader == 1)", expr)
}

// processSection is a service's build and process panels: the versions
// running, CPU, resident memory and goroutines, per pod.
func processSection(service string) section {
	return section{title: "Process", panels: []cog.Builder[dashboard.Panel]{
		singleStat("Version", unitShort,
			"Pods of "+service+" by the version they run (agentplane_build_info). More than one version for long means a rollout that did not finish; no value means Prometheus scrapes no "+service+" pod.",
			q(fmt.Sprintf(`count by (version) (agentplane_build_info{service=%q})`, service), "{{version}}"),
		).TextMode(common.BigValueTextModeValueAndName).GraphMode(common.BigValueGraphModeNone).Span(24),
		timeSeries("CPU", unitShort,
			"CPU cores each "+service+" pod uses (rate of process_cpu_seconds_total). A pod near its CPU limit is throttled and falls behind.",
			q(of(service, rate("process_cpu_seconds_total", "")), "{{instance}}"),
		),
		timeSeries("Resident memory", unitBytes,
			"Resident memory of each "+service+" pod (process_resident_memory_bytes). A steady climb towards the memory limit means a leak and ends in an OOM kill.",
			q(of(service, "process_resident_memory_bytes"), "{{instance}}"),
		),
		timeSeries("Goroutines", unitShort,
			"Goroutines of each "+service+" pod (go_goroutines). A count that only grows means goroutines that never end: a leak of streams, watches or requests.",
			q(of(service, "go_goroutines"), "{{instance}}"),
		),
	}}
}

// grpcSection is a gRPC server's panels: calls by method and code, the
// share that failed, handling latency and messages.
func grpcSection(service, description string) section {
	handled := of(service, rate("grpc_server_handled_total", ""))
	return section{title: "gRPC server", panels: []cog.Builder[dashboard.Panel]{
		timeSeries("Calls by method and code", unitReqPerSec,
			"gRPC calls "+service+" finished per second, by method and status code (grpc_server_handled_total). "+description+" A rise of codes other than OK is callers being refused or failing.",
			q(sumBy(handled, "grpc_method", "grpc_code"), "{{grpc_method}} {{grpc_code}}"),
		),
		timeSeries("Error ratio", unitRatio,
			"Share of the gRPC calls finished with a code other than OK, per method. A ratio above a few percent that stays means callers see failures (Unavailable, Internal, DeadlineExceeded, ...).",
			q(fmt.Sprintf("%s / %s",
				sumBy(of(service, rate("grpc_server_handled_total", `{grpc_code!="OK"}`)), "grpc_method"),
				sumBy(handled, "grpc_method")), "{{grpc_method}}"),
		).Max(1),
		timeSeries("Handling latency", unitSeconds,
			"Median and 99th percentile of the time from a call's start to its answer, per method (grpc_server_handling_seconds; for a stream, its whole life). A p99 that climbs means slow calls and callers that time out.",
			medianAndP99("grpc_server_handling_seconds", service, "grpc_method")...,
		),
		timeSeries("Calls started", unitReqPerSec,
			"gRPC calls started per second, by method (grpc_server_started_total). Compare with the calls finished: a gap that widens is calls that hang.",
			q(sumBy(of(service, rate("grpc_server_started_total", "")), "grpc_method"), "{{grpc_method}}"),
		),
		timeSeries("Messages", unitOpsPerSec,
			"Messages received from and sent to callers per second, by method (grpc_server_msg_received_total, grpc_server_msg_sent_total). Zero sent while calls run means streams that deliver nothing.",
			q(sumBy(of(service, rate("grpc_server_msg_received_total", "")), "grpc_method"), "received {{grpc_method}}"),
			q(sumBy(of(service, rate("grpc_server_msg_sent_total", "")), "grpc_method"), "sent {{grpc_method}}"),
		),
	}}
}
