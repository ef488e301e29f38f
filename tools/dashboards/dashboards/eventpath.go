package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// eventPathBoard is the path of run events and batch notices: what is
// published, what is dropped on the way to NATS or a sink.
func eventPathBoard() board {
	events := rate("controller_run_events_total", "")
	dropped := rate("controller_run_events_dropped_total", "")
	return board{
		uid:         "agentplane-event-path",
		title:       "Run event path",
		description: "Run events from the run pods to NATS (the AGENT_EVENTS stream) and to the recipes' sinks, as each run pod's supervisor reports them when it finishes; what is dropped on the way; and batch-poller's completion notices.",
		sections: []section{
			{title: "Summary", panels: []cog.Builder[dashboard.Panel]{
				singleStat("Run events", unitOpsPerSec,
					"Events the run pods emitted per second, every kind and vendor together (controller_run_events_total, counted when each run pod finishes, as its supervisor reported them). Zero while runs finish means runs that report no events.",
					q(sumBy(events), "events"),
				),
				singleStat("Dropped", unitOpsPerSec,
					"Events the run pods dropped per second, on both paths (controller_run_events_dropped_total). Anything above 0 is events that watchers (agentctl events) or sinks did not get.",
					q(sumBy(dropped), "dropped"),
				).Thresholds(thresholds("green", from(0.001, "red"))),
				singleStat("Sink failures", unitOpsPerSec,
					"Deliveries to a recipe's sink that failed in the run pods, per second (controller_run_sink_failures_total). Above 0 means an http sink that refuses or a file sink that cannot be written.",
					q(sumBy(rate("controller_run_sink_failures_total", "")), "failures"),
				).Thresholds(thresholds("green", from(0.001, "red"))),
				singleStat("Batch notices", unitOpsPerSec,
					"Completion notices batch-poller published on NATS per second (batch_poller_notices_published_total). It should follow the batches that end; none while batches end means the agent-controller learns of them only by polling.",
					q(sumBy(rate("batch_poller_notices_published_total", "")), "notices"),
				),
			}},
			{title: "Published", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Run events by kind", unitOpsPerSec,
					"Events the run pods emitted per second, by kind (controller_run_events_total; counted as each run pod finishes, so in bursts). A kind that disappears (no result events, say) while runs go on means runs that do not report their end.",
					q(sumBy(events, "kind"), "{{kind}}"),
				).Span(12),
				timeSeries("Run events by vendor", unitOpsPerSec,
					"Events the run pods emitted per second, by vendor (controller_run_events_total). A vendor whose runs finish without events means its CLI's output is not understood.",
					q(sumBy(events, "vendor"), "{{vendor}}"),
				).Span(12),
			}},
			{title: "Losses", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Dropped by path", unitOpsPerSec,
					"Events the run pods dropped per second, by path: nats (not published on the AGENT_EVENTS stream: NATS unreachable or the stream full) or sink (not delivered to a recipe's sink) (controller_run_events_dropped_total, as each run pod's supervisor reported them). Anything above 0 is lost events.",
					q(sumBy(dropped, "path"), "{{path}}"),
				),
				timeSeries("Dropped share", unitRatio,
					"Events dropped on each path over the events the run pods emitted. A share that stays above 0 means the path is broken rather than briefly interrupted.",
					q(sumBy(dropped, "path")+" / ignoring (path) group_left () "+sumBy(events), "{{path}}"),
				).Max(1),
				timeSeries("Sink failures", unitOpsPerSec,
					"Deliveries to a recipe's sink that failed in the run pods, per second (controller_run_sink_failures_total). Above 0: check the sink's endpoint or path in the recipe (AgentDefinition output.sinks).",
					q(sumBy(rate("controller_run_sink_failures_total", "")), "failures"),
				),
			}},
			{title: "Batch notices", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Notices published and batches finished", unitOpsPerSec,
					"Completion notices batch-poller published on agentplane.batch.<namespace>.<agent> per second (batch_poller_notices_published_total), next to the batches it saw ending (batch_poller_batches_finished_total). Fewer notices than batches means notices lost on the way to NATS.",
					q(sumBy(rate("batch_poller_notices_published_total", "")), "notices published"),
					q(sumBy(rate("batch_poller_batches_finished_total", "")), "batches finished"),
				).Span(24),
			}},
		},
	}
}
