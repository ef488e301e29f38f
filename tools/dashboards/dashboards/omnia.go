package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// omniaSelector narrows the omnia objects' metrics to the chosen
// namespaces.
const omniaSelector = `{namespace=~"$namespace"}`

// omniaControllersBoard is omnia-controllers: its controllers' reconciles
// and queues, AgentRuntime rollouts, the readiness of runtimes, providers
// and prompt packs, leadership and the API server client.
func omniaControllersBoard() board {
	svc := OmniaControllers
	notReady := func(metric string) string {
		return fmt.Sprintf("count (max by (namespace, %s) (%s%s) == 0) or vector(0)", map[string]string{
			"omnia_agentruntime_ready": "agentruntime",
			"omnia_provider_ready":     "provider",
			"omnia_promptpack_valid":   "promptpack",
		}[metric], metric, omniaSelector)
	}
	return board{
		uid:         "agentplane-omnia-controllers",
		title:       "omnia-controllers",
		description: "omnia-controllers: reconciles, errors and queues per controller, AgentRuntime rollouts, the readiness of AgentRuntimes and Providers, PromptPack validation, leadership, requests to the API server and the process.",
		service:     svc,
		vars: []cog.Builder[dashboard.VariableModel]{
			queryVariable("namespace", "namespace", "omnia_agentruntime_ready", "Namespaces of the omnia objects (AgentRuntimes, Providers, PromptPacks) shown."),
		},
		sections: []section{
			{title: "Summary", panels: []cog.Builder[dashboard.Panel]{
				singleStat("AgentRuntimes not ready", unitShort,
					"AgentRuntimes whose Deployment is not ready (omnia_agentruntime_ready == 0). Above 0 for more than a rollout's time means runtimes that do not start: see their status and events.",
					q(notReady("omnia_agentruntime_ready"), "not ready"),
				).Thresholds(thresholds("green", from(1, "red"))),
				singleStat("Providers not ready", unitShort,
					"Providers that are not ready (omnia_provider_ready == 0): a missing or refused credential, an unreachable endpoint. The AgentRuntimes using them cannot answer.",
					q(notReady("omnia_provider_ready"), "not ready"),
				).Thresholds(thresholds("green", from(1, "red"))),
				singleStat("PromptPacks invalid", unitShort,
					"PromptPacks that failed validation (omnia_promptpack_valid == 0). AgentRuntimes keep their last valid version; fix the pack.",
					q(notReady("omnia_promptpack_valid"), "invalid"),
				).Thresholds(thresholds("green", from(1, "red"))),
				leadersStat("leader_election_master_status",
					"Replicas holding the leader-election Lease (sum of leader_election_master_status; a standby has no series). It must be 1: 0 or no value means nothing reconciles."),
			}},
			{title: "Reconciles", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Reconciles by controller and result", unitOpsPerSec,
					"Reconciles per second by controller (agentruntime, promptpack, provider, toolregistry, skillsource, workspace) and result: success, error, requeue, requeue_after (controller_runtime_reconcile_total). error that persists for a controller means its objects do not progress.",
					q(sumBy(rate("controller_runtime_reconcile_total", ""), "controller", "result"), "{{controller}} {{result}}"),
				),
				timeSeries("Reconcile errors by controller", unitOpsPerSec,
					"Reconciles that returned an error per second, by controller (controller_runtime_reconcile_errors_total). A steady rate means objects stuck; the controller's log and the objects' events name the cause.",
					q(sumBy(rate("controller_runtime_reconcile_errors_total", ""), "controller"), "{{controller}}"),
				),
				timeSeries("Reconcile time p99", unitSeconds,
					"99th percentile of one reconcile's duration, by controller (controller_runtime_reconcile_time_seconds). Seconds mean slow API server calls or slow provider probes.",
					q(quantile(0.99, "controller_runtime_reconcile_time_seconds", "", "", "controller"), "{{controller}}"),
				),
				timeSeries("Queue depth by controller", unitShort,
					"Objects waiting in each controller's queue (workqueue_depth). A depth that keeps growing means the controller cannot keep up.",
					q(sumBy(of(svc, "workqueue_depth"), "controller"), "{{controller}}"),
				),
				timeSeries("Queue wait p99", unitSeconds,
					"99th percentile of the time an object waits in a controller's queue before a worker takes it (workqueue_queue_duration_seconds). Seconds or more mean saturated workers.",
					q(quantile(0.99, "workqueue_queue_duration_seconds", "", svc, "controller"), "{{controller}}"),
				),
				timeSeries("Retries by controller", unitOpsPerSec,
					"Rate-limited and delayed requeues per second, by controller (workqueue_retries_total). Retries growing with errors mean objects that keep failing.",
					q(sumBy(of(svc, rate("workqueue_retries_total", "")), "controller"), "{{controller}}"),
				),
			}},
			{title: "Rollouts", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Rollouts in progress", unitNone,
					"1 while an AgentRuntime has a rollout in progress, per AgentRuntime (omnia_rollout_in_progress). A rollout in progress for hours is paused or stuck on analysis (is --prometheus-url set?).",
					q("max by (namespace, agentruntime) (omnia_rollout_in_progress"+omniaSelector+")", "{{namespace}}/{{agentruntime}}"),
				).Max(1),
				timeSeries("Canary weight", "percent",
					"Share of the traffic (0 to 100) sent to the candidate, per AgentRuntime (omnia_rollout_canary_weight). A weight that falls back to 0 before 100 is a rollout aborted.",
					q("max by (namespace, agentruntime) (omnia_rollout_canary_weight"+omniaSelector+")", "{{namespace}}/{{agentruntime}}"),
				).Max(100),
				timeSeries("Rollout steps", unitOpsPerSec,
					"Rollout steps taken per second, per AgentRuntime (omnia_rollout_steps_total). No steps while a rollout is in progress means it is paused or waiting on analysis.",
					q(sumBy(rate("omnia_rollout_steps_total", omniaSelector), "namespace", "agentruntime"), "{{namespace}}/{{agentruntime}}"),
				),
				timeSeries("Rollouts finished by result", unitOpsPerSec,
					"Rollouts that ended per second, by result: promoted (the candidate went into the spec) or rolled_back (a failed analysis, or a candidate past its progress deadline, with rollback.mode automatic) (omnia_rollouts_finished_total). rolled_back means candidates that did not pass.",
					q(sumBy(rate("omnia_rollouts_finished_total", ""), "result"), "{{result}}"),
				).Span(24),
			}},
			{title: "Readiness", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("AgentRuntimes ready", unitNone,
					"1 when an AgentRuntime's Deployment is ready, 0 when not, per AgentRuntime (omnia_agentruntime_ready). A runtime at 0 beyond a rollout does not serve.",
					q("max by (namespace, agentruntime) (omnia_agentruntime_ready"+omniaSelector+")", "{{namespace}}/{{agentruntime}}"),
				).Max(1),
				timeSeries("Providers ready", unitNone,
					"1 when a Provider is ready, 0 when not, per Provider (omnia_provider_ready). 0 means a credential or endpoint problem that stops every AgentRuntime using it.",
					q("max by (namespace, provider) (omnia_provider_ready"+omniaSelector+")", "{{namespace}}/{{provider}}"),
				).Max(1),
				timeSeries("PromptPacks valid", unitNone,
					"1 when a PromptPack passed validation, 0 when not, per PromptPack (omnia_promptpack_valid). 0 means a pack that AgentRuntimes cannot use.",
					q("max by (namespace, promptpack) (omnia_promptpack_valid"+omniaSelector+")", "{{namespace}}/{{promptpack}}"),
				).Max(1),
				timeSeries("PromptPack validation failures by stage", unitOpsPerSec,
					"PromptPack validations that failed per second, by stage: source (the ConfigMap or its pack.json key) or schema (pack.json against the PromptPack schema) (omnia_promptpack_validation_failures_total; each failure counts once, when it is stored). A steady rate means packs published broken or edited into failure.",
					q(sumBy(rate("omnia_promptpack_validation_failures_total", omniaSelector), "stage"), "{{stage}}"),
				),
			}},
			{title: "Controller", panels: []cog.Builder[dashboard.Panel]{
				timeSeries("Leader", unitNone,
					"1 on the replica holding the leader-election Lease (leader_election_master_status; a standby has no series), per pod. No replica at 1 means nothing reconciles; a line that moves between pods means the Lease changes hands.",
					q("max by (instance, name) (leader_election_master_status)", "{{instance}}"),
				).Max(1),
				timeSeries("API server requests by code", unitReqPerSec,
					"Requests to the API server per second, by HTTP status code and method (rest_client_requests_total). 429 means throttling (--kube-api-qps); 5xx an unhealthy API server.",
					q(sumBy(of(svc, rate("rest_client_requests_total", "")), "code", "method"), "{{code}} {{method}}"),
				),
				timeSeries("API server request errors", unitReqPerSec,
					"Requests to the API server that did not succeed (a status code other than 2xx, or no response), per second, by code. A steady rate of 5xx or of failed requests means the controllers cannot read or write their objects.",
					q(sumBy(of(svc, rate("rest_client_requests_total", `{code!~"2.."}`)), "code"), "{{code}}"),
				),
			}},
			processSection(svc),
		},
	}
}
