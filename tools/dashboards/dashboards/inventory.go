package dashboards

import "strings"

// The services that serve /metrics, as the service label of
// agentplane_build_info names them.
const (
	AgentController  = "agent-controller"
	BatchPoller      = "batch-poller"
	RealtimeGateway  = "realtime-gateway"
	OmniaControllers = "omnia-controllers"
)

// The metric types of the inventory.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
)

// Metric is one metric of the inventory: its type and the services that
// export it.
type Metric struct {
	Type     string
	Services []string
}

var (
	controllers = []string{AgentController, OmniaControllers}
	grpcServers = []string{BatchPoller, RealtimeGateway}
	everyone    = []string{AgentController, BatchPoller, RealtimeGateway, OmniaControllers}
)

// Inventory is every metric a dashboard may query, by name: the metrics
// the services export. It mirrors the Metrics sections of
// docs/agent-controller.md, docs/batch-poller.md, docs/realtime-gateway.md
// and docs/omnia-controllers.md; a metric added to or renamed in one of
// them is added or renamed here too. A histogram is listed under its base
// name; its series are the _bucket, _sum and _count ones (see Known).
var Inventory = map[string]Metric{
	// agent-controller
	"controller_agents":                        {Gauge, []string{AgentController}},
	"controller_runs_completed_total":          {Counter, []string{AgentController}},
	"controller_run_duration_seconds":          {Histogram, []string{AgentController}},
	"controller_run_queue_seconds":             {Histogram, []string{AgentController}},
	"controller_run_failures_total":            {Counter, []string{AgentController}},
	"controller_resyncs_total":                 {Counter, []string{AgentController}},
	"controller_watch_reconnects_total":        {Counter, []string{AgentController}},
	"controller_batch_cleanup_failures_total":  {Counter, []string{AgentController}},
	"controller_batch_cleanups_given_up_total": {Counter, []string{AgentController}},
	"controller_reconciles_total":              {Counter, []string{AgentController}},
	"controller_is_leader":                     {Gauge, []string{AgentController}},
	"controller_undecodable_objects":           {Gauge, []string{AgentController}},
	"controller_runs_started_total":            {Counter, []string{AgentController}},
	"controller_runs_finished_total":           {Counter, []string{AgentController}},
	"controller_station_active_runs":           {Gauge, []string{AgentController}},
	"controller_station_max_concurrent_runs":   {Gauge, []string{AgentController}},
	"controller_run_events_total":              {Counter, []string{AgentController}},
	"controller_run_events_dropped_total":      {Counter, []string{AgentController}},
	"controller_run_sink_failures_total":       {Counter, []string{AgentController}},
	"controller_kube_events_dropped_total":     {Counter, []string{AgentController}},

	// client-go's work queue and REST client, under controller-runtime's
	// names: agent-controller and omnia-controllers (which serves no
	// request latency).
	"workqueue_depth":                             {Gauge, controllers},
	"workqueue_adds_total":                        {Counter, controllers},
	"workqueue_queue_duration_seconds":            {Histogram, controllers},
	"workqueue_work_duration_seconds":             {Histogram, controllers},
	"workqueue_unfinished_work_seconds":           {Gauge, controllers},
	"workqueue_longest_running_processor_seconds": {Gauge, controllers},
	"workqueue_retries_total":                     {Counter, controllers},
	"rest_client_requests_total":                  {Counter, controllers},
	"rest_client_request_duration_seconds":        {Histogram, []string{AgentController}},

	// batch-poller
	"batch_poller_batches_in_flight":       {Gauge, []string{BatchPoller}},
	"batch_poller_vendor_calls_total":      {Counter, []string{BatchPoller}},
	"batch_poller_vendor_call_seconds":     {Histogram, []string{BatchPoller}},
	"batch_poller_batches_finished_total":  {Counter, []string{BatchPoller}},
	"batch_poller_notices_published_total": {Counter, []string{BatchPoller}},

	// The gRPC servers (libs/service): batch-poller and realtime-gateway.
	"grpc_server_started_total":      {Counter, grpcServers},
	"grpc_server_handled_total":      {Counter, grpcServers},
	"grpc_server_handling_seconds":   {Histogram, grpcServers},
	"grpc_server_msg_received_total": {Counter, grpcServers},
	"grpc_server_msg_sent_total":     {Counter, grpcServers},

	// realtime-gateway
	"realtime_gateway_sessions_active":        {Gauge, []string{RealtimeGateway}},
	"realtime_gateway_prompts_total":          {Counter, []string{RealtimeGateway}},
	"realtime_gateway_prompt_latency_seconds": {Histogram, []string{RealtimeGateway}},
	"realtime_gateway_upstream_dial_seconds":  {Histogram, []string{RealtimeGateway}},

	// omnia-controllers
	"controller_runtime_reconcile_total":         {Counter, []string{OmniaControllers}},
	"controller_runtime_reconcile_errors_total":  {Counter, []string{OmniaControllers}},
	"controller_runtime_reconcile_time_seconds":  {Histogram, []string{OmniaControllers}},
	"leader_election_master_status":              {Gauge, []string{OmniaControllers}},
	"omnia_agentruntime_ready":                   {Gauge, []string{OmniaControllers}},
	"omnia_rollout_in_progress":                  {Gauge, []string{OmniaControllers}},
	"omnia_rollout_canary_weight":                {Gauge, []string{OmniaControllers}},
	"omnia_rollout_steps_total":                  {Counter, []string{OmniaControllers}},
	"omnia_rollouts_finished_total":              {Counter, []string{OmniaControllers}},
	"omnia_provider_ready":                       {Gauge, []string{OmniaControllers}},
	"omnia_promptpack_valid":                     {Gauge, []string{OmniaControllers}},
	"omnia_promptpack_validation_failures_total": {Counter, []string{OmniaControllers}},

	// Every service (libs/service.RegisterBuildInfo).
	"agentplane_build_info": {Gauge, everyone},

	// The Go and process collectors, in every service.
	"go_goroutines":                 {Gauge, everyone},
	"process_cpu_seconds_total":     {Counter, everyone},
	"process_resident_memory_bytes": {Gauge, everyone},
}

// Known reports whether a series name belongs to a metric of the
// Inventory: the metric's own name, or for a histogram its _bucket, _sum
// or _count series.
func Known(series string) bool {
	_, ok := InventoryMetric(series)
	return ok
}

// InventoryMetric returns the name of the Inventory metric a series name
// belongs to (a histogram's _bucket, _sum and _count series belong to the
// histogram), and whether there is one.
func InventoryMetric(series string) (string, bool) {
	if _, ok := Inventory[series]; ok {
		return series, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if ok && Inventory[base].Type == Histogram {
			return base, true
		}
	}
	return "", false
}
