package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// deniedCodes are the prompt codes of refused callers.
const deniedCodes = `{code=~"Unauthenticated|PermissionDenied"}`

// realtimeGatewayBoard is realtime-gateway: prompt sessions, their codes
// and latency, the dials to run pods, its gRPC server and process.
func realtimeGatewayBoard() board {
	svc := RealtimeGateway
	prompts := rate("realtime_gateway_prompts_total", "")
	return board{
		uid:         "agentplane-realtime-gateway",
		title:       "realtime-gateway",
		description: "realtime-gateway: prompt sessions, prompts by code (refused callers included), prompt latency, dials to run pods, the PromptService gRPC server and the process.",
		service:     svc,
		sections: []section{
			{title: "Summary", panels: []cog.Builder[dashboard.Panel]{
				singleStat("Active sessions", unitShort,
					"Prompt streams open now (realtime_gateway_sessions_active). A drop to 0 while people prompt means the gateway or the run pods are unreachable.",
					q(sumBy("realtime_gateway_sessions_active"), "sessions"),
				),
				singleStat("Prompts", unitReqPerSec,
					"Prompt calls finished per second (realtime_gateway_prompts_total), every code together.",
					q(sumBy(prompts), "prompts"),
				),
				singleStat("Prompt error ratio", unitRatio,
					"Share of the prompt calls that ended with a code other than OK, refused callers included. Above a few percent, see Prompts by code.",
					q(fmt.Sprintf("%s / %s", sumBy(rate("realtime_gateway_prompts_total", `{code!="OK"}`)), sumBy(prompts)), "errors"),
				).Thresholds(thresholds("green", from(0.05, "orange"), from(0.2, "red"))),
				singleStat("First event p99", unitSeconds,
					"99th percentile of the time from a prompt to its first streamed message (realtime_gateway_prompt_latency_seconds{stage=\"first_event\"}). Many seconds mean slow run pods or models.",
					q(quantile(0.99, "realtime_gateway_prompt_latency_seconds", `{stage="first_event"}`, ""), "p99"),
				).Thresholds(thresholds("green", from(5, "orange"), from(30, "red"))),
			}},
			{title: "Prompts", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Active sessions", unitShort,
					"Prompt streams open now (realtime_gateway_sessions_active), per pod. A pod with none while others have many means the callers do not reach it.",
					q("realtime_gateway_sessions_active", "{{instance}}"),
				),
				timeSeries("Prompts by code", unitReqPerSec,
					"Prompt calls finished per second, by gRPC code (realtime_gateway_prompts_total). Unavailable means run pods that cannot be reached; Internal a failure in the gateway; FailedPrecondition a run that is not ready.",
					q(sumBy(prompts, "code"), "{{code}}"),
				),
				timeSeries("Refused prompts", unitReqPerSec,
					"Prompt calls refused per second: Unauthenticated (no or a bad token) and PermissionDenied (the caller may not prompt that Agent; a SubjectAccessReview said no). A burst means a misconfigured client or someone probing.",
					q(sumBy(rate("realtime_gateway_prompts_total", deniedCodes), "code"), "{{code}}"),
				),
				promptLatency("Median and 99th percentile of the time from a prompt to its first streamed message (first_event) and to the turn's end (turn) (realtime_gateway_prompt_latency_seconds). A first_event p99 that climbs means slow run pods or models."),
				timeSeries("Upstream dial latency", unitSeconds,
					"Median and 99th percentile of the time to connect to a run pod's session server (realtime_gateway_upstream_dial_seconds). Near --dial-timeout means run pods that are slow to answer or a network in the way.",
					medianAndP99("realtime_gateway_upstream_dial_seconds", "")...,
				),
				timeSeries("Dials", unitOpsPerSec,
					"Connections opened to run pods per second (the count of realtime_gateway_upstream_dial_seconds). Far more dials than prompts means connections are not reused.",
					q(sumBy(rate("realtime_gateway_upstream_dial_seconds_count", "")), "dials"),
				),
			}},
			grpcSection(svc, "Callers prompt realtime runs through agentplane.realtime.v1.PromptService here."),
			processSection(svc),
		},
	}
}
