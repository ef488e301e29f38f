package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// batchPollerBoard is batch-poller: the vendor batch APIs it calls, the
// batches it tracks, the notices it publishes, its gRPC server and process.
func batchPollerBoard() board {
	svc := BatchPoller
	calls := rate("batch_poller_vendor_calls_total", "")
	errorRatio := fmt.Sprintf("%s / %s",
		sumBy(rate("batch_poller_vendor_calls_total", `{outcome="error"}`), "provider", "op"),
		sumBy(calls, "provider", "op"))
	return board{
		uid:         "agentplane-batch-poller",
		title:       "batch-poller",
		description: "batch-poller: calls to the vendor batch APIs, batches in flight and finished, completion notices, the BatchService gRPC server and the process.",
		service:     svc,
		sections: []section{
			{title: "Summary", panels: []cog.Builder[dashboard.Panel]{
				singleStat("Batches in flight", unitShort,
					"Tracked batches that have not ended (batch_poller_batches_in_flight). A count that only grows means batches the vendors do not finish or polls that fail.",
					q(sumBy("batch_poller_batches_in_flight"), "in flight"),
				),
				singleStat("Vendor call error ratio", unitRatio,
					"Share of the vendor API calls that failed, all providers and operations together. Above a few percent, batches are not submitted or their results not fetched: check the API keys (agent-secrets) and the vendors' status.",
					q(fmt.Sprintf("%s / %s", sumBy(rate("batch_poller_vendor_calls_total", `{outcome="error"}`)), sumBy(calls)), "errors"),
				).Thresholds(thresholds("green", from(0.05, "orange"), from(0.2, "red"))),
				singleStat("Batches finished", unitOpsPerSec,
					"Batches seen ending per second (batch_poller_batches_finished_total). Zero while batches are in flight for hours is worth a look at the vendors.",
					q(sumBy(rate("batch_poller_batches_finished_total", "")), "finished"),
				),
				singleStat("Notices published", unitOpsPerSec,
					"Completion notices published on NATS per second (batch_poller_notices_published_total). It should follow Batches finished; lower means the agent-controller is not told that batches ended.",
					q(sumBy(rate("batch_poller_notices_published_total", "")), "notices"),
				),
			}},
			{title: "Vendor calls", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Vendor calls by outcome", unitOpsPerSec,
					"Vendor API operations per second by provider, operation (submit, poll, cancel, delete) and outcome (ok, error) (batch_poller_vendor_calls_total). Errors that persist for one provider point at its API key or its service.",
					q(sumBy(calls, "provider", "op", "outcome"), "{{provider}} {{op}} {{outcome}}"),
				),
				timeSeries("Vendor call error ratio", unitRatio,
					"Share of the vendor API operations that failed, by provider and operation. submit failing means runs never reach the vendor; poll failing means results are not fetched.",
					q(errorRatio, "{{provider}} {{op}}"),
				).Max(1),
				timeSeries("Vendor call latency p99", unitSeconds,
					"99th percentile of the vendor API operations' latency, by provider and operation (batch_poller_vendor_call_seconds; poll includes the result download of an ended batch). Tens of seconds mean a slow vendor or large results.",
					q(quantile(0.99, "batch_poller_vendor_call_seconds", "", "", "provider", "op"), "{{provider}} {{op}}"),
				),
			}},
			{title: "Batches", panels: []cog.Builder[dashboard.Panel]{
				batchesInFlight("Tracked batches that have not ended (batch_poller_batches_in_flight). It rises with submits and falls as batches end; a steady climb means batches that never end."),
				batchesFinishedByState("Batches seen ending per second, by provider and state (batch_poller_batches_finished_total). failed growing means the vendor rejects the requests or the prompts."),
				timeSeries("Notices published", unitOpsPerSec,
					"Completion notices published on NATS per second (batch_poller_notices_published_total), next to the batches finished. Fewer notices than finished batches means notices lost (NATS unreachable): the agent-controller then learns of the end only by polling.",
					q(sumBy(rate("batch_poller_notices_published_total", "")), "notices published"),
					q(sumBy(rate("batch_poller_batches_finished_total", "")), "batches finished"),
				),
			}},
			grpcSection(svc, "The agent-controller calls agentplane.batch.v1.BatchService here."),
			processSection(svc),
		},
	}
}
