package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// runSelector narrows the per-run metrics to the chosen namespaces (the
// Agents') and Stations.
const runSelector = `namespace=~"$namespace", station=~"$station"`

// overview is "Agent runs": the platform as its users see it, across the
// services.
func overview() board {
	sel := "{" + runSelector + "}"
	finished := func(phase string) string {
		return rate("controller_runs_finished_total", fmt.Sprintf(`{%s, phase=%q}`, runSelector, phase))
	}
	active := leaderOnly("controller_station_active_runs" + sel)
	limit := leaderOnly("controller_station_max_concurrent_runs" + sel)
	return board{
		uid:         "agentplane-overview",
		title:       "Agent runs",
		description: "agentplane at a glance: runs started, finished and failed, queue time and duration, Station concurrency, the controller's leadership and watches, batch and realtime runs, run events, and the services' versions and resources.",
		vars: []cog.Builder[dashboard.VariableModel]{
			queryVariable("namespace", "namespace", "controller_runs_started_total", "Namespaces of the Agents (runs) shown."),
			queryVariable("station", "station", `controller_runs_started_total{namespace=~"$namespace"}`, "Stations of the runs shown."),
			queryVariable("service", "service", "agentplane_build_info", "Services shown in the Services row."),
		},
		sections: []section{
			{title: "Summary", panels: []cog.Builder[dashboard.Panel]{
				singleStat("Active runs", unitShort,
					"Runs holding a slot on their Station now, summed over the chosen Stations (controller_station_active_runs, from the leading agent-controller). A number stuck at the Stations' limits means runs wait in the queue.",
					q(sumBy(active), "active"),
				),
				singleStat("Runs started", unitOpsPerSec,
					"Runs the agent-controller started per second (controller_runs_started_total). Zero while Agents are created means the controller is not starting runs: look at its leader, queue and errors.",
					q(sumBy(rate("controller_runs_started_total", sel)), "started"),
				),
				singleStat("Run failure ratio", unitRatio,
					"Share of the finished runs that failed (controller_runs_finished_total, phase Failed over all). Above a few percent, look at Failures by kind.",
					q(fmt.Sprintf("%s / %s", sumBy(finished("Failed")), sumBy(rate("controller_runs_finished_total", sel))), "failed"),
				).Thresholds(thresholds("green", from(0.05, "orange"), from(0.2, "red"))),
				leadersStat("controller_is_leader",
					"agent-controller replicas that reconcile (sum of controller_is_leader). It must be 1: 0 means no replica reconciles and runs stall; 2 means two replicas reconcile at once."),
			}},
			{title: "Runs", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Runs started by station and vendor", unitOpsPerSec,
					"Runs started per second, by namespace, Station and vendor (controller_runs_started_total). A Station that stops starting runs while its Agents pile up is blocked: its concurrency limit, a missing recipe or the controller.",
					q(sumBy(rate("controller_runs_started_total", sel), "namespace", "station", "vendor"), "{{namespace}}/{{station}} {{vendor}}"),
				),
				timeSeries("Runs succeeded by station and vendor", unitOpsPerSec,
					"Runs that ended Succeeded per second, by namespace, Station and vendor (controller_runs_finished_total{phase=\"Succeeded\"}). A drop with runs still started means runs fail or hang.",
					q(sumBy(finished("Succeeded"), "namespace", "station", "vendor"), "{{namespace}}/{{station}} {{vendor}}"),
				),
				timeSeries("Runs failed by station and vendor", unitOpsPerSec,
					"Runs that ended Failed per second, by namespace, Station and vendor (controller_runs_finished_total{phase=\"Failed\"}). Any steady rate is worth a look; one Station or vendor alone points at its recipe, image or API key.",
					q(sumBy(finished("Failed"), "namespace", "station", "vendor"), "{{namespace}}/{{station}} {{vendor}}"),
				),
				timeSeries("Failures by kind", unitOpsPerSec,
					"Run failures per second by kind (controller_run_failures_total): missing_ref (a Station or recipe that does not exist), job_failed (the run pod failed), output_unavailable, preempted (Replace policy), invalid_spec. job_failed growing means the agents themselves fail; missing_ref and invalid_spec mean wrong Agents.",
					q(sumBy(rate("controller_run_failures_total", ""), "kind"), "{{kind}}"),
				),
				timeSeries("Queue time", unitSeconds,
					"Median and 99th percentile of the time a run waits from its Agent's creation to its start (controller_run_queue_seconds). A p99 that climbs means Stations at their concurrency limit or a controller that falls behind.",
					medianAndP99("controller_run_queue_seconds", "")...,
				),
				timeSeries("Run duration", unitSeconds,
					"Median and 99th percentile of a run's duration from start to end, by final phase (controller_run_duration_seconds). A p99 at the Stations' deadlines means runs that hang until they are stopped.",
					medianAndP99("controller_run_duration_seconds", "", "phase")...,
				),
			}},
			{title: "Concurrency", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Active runs per station against its limit", unitShort,
					"Runs holding a slot on each Station (controller_station_active_runs) and the Station's effective limit, dashed (controller_station_max_concurrent_runs: maxConcurrentRuns, 1 under the Forbid and Replace policies; Stations without a limit have no line). Active runs at the limit for long mean new runs queue.",
					q(sumBy(active, "namespace", "station"), "{{namespace}}/{{station}}"),
					q(sumBy(limit, "namespace", "station")+" > 0", "limit {{namespace}}/{{station}}"),
				).Span(12).OverrideByRegexp("^limit ", []dashboard.DynamicConfigValue{
					{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
					{Id: "custom.fillOpacity", Value: 0},
				}),
				timeSeries("Station saturation", unitRatio,
					"Active runs over the Station's effective limit (maxConcurrentRuns, or 1 under Forbid and Replace), for the Stations that have one. At 100% new runs of the Station wait for a slot; a Station that stays there needs a higher limit or fewer runs.",
					q(fmt.Sprintf("%s / (%s > 0)", sumBy(active, "namespace", "station"), sumBy(limit, "namespace", "station")), "{{namespace}}/{{station}}"),
				).Span(12).Thresholds(thresholds("green", from(0.8, "orange"), from(1, "red"))).
					ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
			}},
			{title: "Controller", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Leader", unitNone,
					"1 on the agent-controller replica that reconciles, 0 on a standby (controller_is_leader), per pod. No replica at 1 means runs stall; a flapping line means the Lease changes hands, a sign of API server trouble.",
					q("max by (instance) (controller_is_leader)", "{{instance}}"),
				).Max(1),
				timeSeries("Watch reconnects and resyncs", unitOpsPerSec,
					"Times the agent-controller's Agent watch was opened again after it closed (controller_watch_reconnects_total), and its LISTs of Agents, the poll's and the watch re-lists (controller_resyncs_total; one per poll interval is normal). Frequent reconnects mean an unstable API server connection.",
					q(sumBy(rate("controller_watch_reconnects_total", "")), "watch reconnects"),
					q(sumBy(rate("controller_resyncs_total", "")), "resyncs"),
				),
				timeSeries("Reconciles by result", unitOpsPerSec,
					"Agent reconciles per second by result: ok, conflict (an update raced another; retried), error (controller_reconciles_total). A steady error rate means Agents that do not progress; the agent-controller dashboard has the details.",
					q(sumBy(rate("controller_reconciles_total", ""), "result"), "{{result}}"),
				),
			}},
			{title: "Batch runs", panels: []cog.Builder[dashboard.Panel]{
				batchesInFlight("Batches batch-poller tracks that have not ended (batch_poller_batches_in_flight). A count that only grows means batches the vendors do not finish or polls that fail."),
				batchesFinishedByState("Batches seen ending per second, by provider and state (batch_poller_batches_finished_total). failed growing points at the vendor or the prompts."),
				timeSeries("Batch cleanup failures", unitOpsPerSec,
					"Failed attempts to cancel or delete a batch run's vendor batch when its Agent is deleted (controller_batch_cleanup_failures_total), and cleanups given up after the last attempt (controller_batch_cleanups_given_up_total). Any steady rate of failures means Agents held by their batch-cleanup finalizer; any cleanup given up is a batch left at the vendor (alert AgentBatchCleanupGivenUp).",
					q(sumBy(rate("controller_batch_cleanup_failures_total", "")), "cleanup failures"),
					q(sumBy(rate("controller_batch_cleanups_given_up_total", "")), "given up"),
				),
			}},
			{title: "Realtime runs", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Realtime sessions", unitShort,
					"Prompt streams open on realtime-gateway now (realtime_gateway_sessions_active). A sudden drop to 0 while people prompt means the gateway or the run pods are unreachable.",
					q(sumBy("realtime_gateway_sessions_active"), "sessions"),
				),
				timeSeries("Prompts by code", unitReqPerSec,
					"Prompt calls finished per second, by gRPC code (realtime_gateway_prompts_total). Unauthenticated and PermissionDenied are refused callers; Unavailable and Internal are failures of the gateway or the run pod.",
					q(sumBy(rate("realtime_gateway_prompts_total", ""), "code"), "{{code}}"),
				),
				promptLatency("Median and 99th percentile of the time from a prompt to its first streamed message (first_event) and to the turn's end (turn) (realtime_gateway_prompt_latency_seconds). A first_event p99 of many seconds means slow run pods or models."),
			}},
			{title: "Run events", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Run events by kind", unitOpsPerSec,
					"Events the run pods emitted per second, by kind (controller_run_events_total: counted when a run pod finishes, as its supervisor reported them, so they come in bursts at the runs' ends). Zero while runs finish means runs that report no events; see the Run event path dashboard.",
					q(sumBy(rate("controller_run_events_total", ""), "kind"), "{{kind}}"),
				).Span(12),
				timeSeries("Run events dropped", unitOpsPerSec,
					"Events the run pods dropped per second, by path: nats (not published on the AGENT_EVENTS stream) or sink (not delivered to a recipe's sink) (controller_run_events_dropped_total, reported when each run pod finishes). Anything above 0 is events lost to watchers or sinks.",
					q(sumBy(rate("controller_run_events_dropped_total", ""), "path"), "{{path}}"),
				).Span(12),
			}},
			{title: "Services", panels: []cog.Builder[dashboard.Panel]{
				singleStat("Versions running", unitShort,
					"Pods of each service by version (agentplane_build_info). Two versions of a service for long means a rollout that did not finish; a service missing means Prometheus does not scrape it.",
					q(`count by (service, version) (agentplane_build_info{service=~"$service"})`, "{{service}} {{version}}"),
				).TextMode(common.BigValueTextModeValueAndName).GraphMode(common.BigValueGraphModeNone).Span(8),
				timeSeries("CPU by service", unitShort,
					"CPU cores each service uses, all its pods together (process_cpu_seconds_total, attributed to the service through agentplane_build_info). A service near its pods' CPU limits is throttled.",
					q(sumBy(rate("process_cpu_seconds_total", "")+` * on (job, instance) group_left (service) agentplane_build_info{service=~"$service"}`, "service"), "{{service}}"),
				),
				timeSeries("Memory by service", unitBytes,
					"Resident memory of each service, all its pods together (process_resident_memory_bytes). A steady climb means a leak that ends in an OOM kill.",
					q(sumBy(`process_resident_memory_bytes * on (job, instance) group_left (service) agentplane_build_info{service=~"$service"}`, "service"), "{{service}}"),
				),
			}},
		},
	}
}
