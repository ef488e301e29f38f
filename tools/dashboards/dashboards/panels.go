package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The panels that stand on more than one dashboard: one query and title,
// each dashboard's own description.

// leadersStat is a leader-elected service's Summary stat: the replicas
// that lead, summed from series (1 on the leader), green only at exactly 1.
func leadersStat(series, description string) *stat.PanelBuilder {
	return singleStat("Leaders", unitNone, description, q(sumBy(series), "leaders")).
		Thresholds(thresholds("red", from(1, "green"), from(2, "red"))).GraphMode(common.BigValueGraphModeNone)
}

// batchesInFlight is the batches batch-poller tracks that have not ended.
func batchesInFlight(description string) *timeseries.PanelBuilder {
	return timeSeries("Batches in flight", unitShort, description, q(sumBy("batch_poller_batches_in_flight"), "in flight"))
}

// batchesFinishedByState is the batches seen ending per second, by
// provider and state.
func batchesFinishedByState(description string) *timeseries.PanelBuilder {
	return timeSeries("Batches finished by state", unitOpsPerSec, description,
		q(sumBy(rate("batch_poller_batches_finished_total", ""), "provider", "state"), "{{provider}} {{state}}"))
}

// promptLatency is realtime-gateway's time from a prompt to its first
// streamed message and to the turn's end.
func promptLatency(description string) *timeseries.PanelBuilder {
	return timeSeries("Prompt latency", unitSeconds, description, medianAndP99("realtime_gateway_prompt_latency_seconds", "", "stage")...)
}
