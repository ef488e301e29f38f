// Package metrics holds the Prometheus metrics omnia-controllers exports
// next to controller-runtime's: a series per AgentRuntime, Provider and
// PromptPack, set from the status each pass leaves stored and deleted with
// the object, and the rollout counters. Their names and labels are listed
// in docs/omnia-controllers.md; dashboards and alert rules select on them,
// so they do not change.
//
// Only the leader reconciles, so only the leader has per-object series.
// Every number is this process's own: a new leader sets the gauges on its
// first pass over each object (all of them are reconciled once the caches
// sync), and its counters start from zero, which Prometheus reads as a
// reset.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label values of RolloutsFinished.
const (
	// ResultPromoted: the candidate became the spec.
	ResultPromoted = "promoted"
	// ResultRolledBack: the rollout engine abandoned the candidate
	// (rollback mode automatic).
	ResultRolledBack = "rolled_back"
)

// The per-object label names. The object's label is named after its kind,
// not "name", so that it never clashes with a label of the scrape target.
const (
	labelNamespace    = "namespace"
	labelAgentRuntime = "agentruntime"
	labelProvider     = "provider"
	labelPromptPack   = "promptpack"
)

var agentLabels = []string{labelNamespace, labelAgentRuntime}

// gauge and counter build the vector of one metric: every declaration
// below differs only in its name, help and labels.
func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

var (
	// AgentRuntimeReady is omnia_agentruntime_ready{namespace,agentruntime}:
	// 1 while the AgentRuntime's Ready condition is True, else 0.
	AgentRuntimeReady = gauge("omnia_agentruntime_ready", "1 while the AgentRuntime's Ready condition is True, else 0.", agentLabels...)

	// RolloutInProgress is omnia_rollout_in_progress{namespace,agentruntime}:
	// 1 while status.rollout.active, from the first step to the end of the
	// promotion, else 0.
	RolloutInProgress = gauge("omnia_rollout_in_progress", "1 while a rollout of the AgentRuntime is in progress (status.rollout.active), promotion included, else 0.", agentLabels...)

	// RolloutCanaryWeight is omnia_rollout_canary_weight{namespace,agentruntime}:
	// status.rollout.currentWeight while a rollout is in progress, else 0.
	RolloutCanaryWeight = gauge("omnia_rollout_canary_weight", "Traffic weight of the rollout candidate in percent (status.rollout.currentWeight); 0 without a rollout.", agentLabels...)

	// RolloutSteps is omnia_rollout_steps_total{namespace,agentruntime}: the
	// advances of status.rollout.currentStep.
	RolloutSteps = counter("omnia_rollout_steps_total", "Rollout steps the AgentRuntime completed: advances of status.rollout.currentStep.", agentLabels...)

	// RolloutsFinished is omnia_rollouts_finished_total{result}: rollouts
	// that ended, by ResultPromoted and ResultRolledBack.
	RolloutsFinished = counter("omnia_rollouts_finished_total", "Rollouts that ended, by result: promoted or rolled_back.", "result")

	// ProviderReady is omnia_provider_ready{namespace,provider}: 1 while the
	// Provider's Ready condition is True, else 0.
	ProviderReady = gauge("omnia_provider_ready", "1 while the Provider's Ready condition is True, else 0.", labelNamespace, labelProvider)

	// PromptPackValid is omnia_promptpack_valid{namespace,promptpack}: 1
	// while the PromptPack validated (see PromptPackValidated), else 0.
	PromptPackValid = gauge("omnia_promptpack_valid", "1 while the PromptPack version validated (SourceValid and SchemaValid True; a live source: SourceValid True), else 0.", labelNamespace, labelPromptPack)

	// PromptPackValidationFailures is
	// omnia_promptpack_validation_failures_total{namespace,promptpack,stage}:
	// the times a stage's condition became False (PromptPackFailures).
	PromptPackValidationFailures = counter("omnia_promptpack_validation_failures_total",
		"Validation failures of the PromptPack version, by stage (source, schema): each time the stage's condition becomes False.",
		labelNamespace, labelPromptPack, "stage")
)

// Stages of PromptPackValidationFailures.
const (
	// StageSource: SourceValid, the ConfigMap and its pack.json key.
	StageSource = "source"
	// StageSchema: SchemaValid, pack.json against the PromptPack schema.
	StageSchema = "schema"
)

func init() {
	// Both results exist from the start, so increase() and rate() see the
	// first rollout that ends rather than a series appearing at 1.
	for _, r := range []string{ResultPromoted, ResultRolledBack} {
		RolloutsFinished.WithLabelValues(r)
	}
}

// Collectors returns every metric of this package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{AgentRuntimeReady, RolloutInProgress, RolloutCanaryWeight, RolloutSteps, RolloutsFinished,
		ProviderReady, PromptPackValid, PromptPackValidationFailures}
}

// Register registers every metric of this package on reg. Registering
// them again on the same registry is no error: tests start the binary's
// manager more than once in one process, on controller-runtime's one
// registry.
func Register(reg prometheus.Registerer) error {
	for _, c := range Collectors() {
		err := reg.Register(c)
		var dup prometheus.AlreadyRegisteredError
		if err == nil || errors.As(err, &dup) && dup.ExistingCollector == c {
			continue
		}
		return fmt.Errorf("register omnia metrics: %w", err)
	}
	return nil
}

// flag is a gauge value of a condition.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetAgentRuntime records one pass over an AgentRuntime (see
// AgentRuntimePass): the gauges from the status stored when it ended, the
// counters from what it changed.
func SetAgentRuntime(namespace, name string, p AgentRuntimePass) {
	o := p.Observe()
	AgentRuntimeReady.WithLabelValues(namespace, name).Set(flag(o.Ready))
	RolloutInProgress.WithLabelValues(namespace, name).Set(flag(o.InProgress))
	RolloutCanaryWeight.WithLabelValues(namespace, name).Set(float64(o.CanaryWeight))
	// Created at 0 with the other series, so the first step is an increase.
	steps := RolloutSteps.WithLabelValues(namespace, name)
	if o.Steps > 0 {
		steps.Add(float64(o.Steps))
	}
	if o.Finished != "" {
		RolloutsFinished.WithLabelValues(o.Finished).Inc()
	}
}

// DeleteAgentRuntime drops the series of an AgentRuntime that is gone.
func DeleteAgentRuntime(namespace, name string) {
	for _, v := range []*prometheus.MetricVec{AgentRuntimeReady.MetricVec, RolloutInProgress.MetricVec, RolloutCanaryWeight.MetricVec, RolloutSteps.MetricVec} {
		v.DeleteLabelValues(namespace, name)
	}
}

// SetProviderReady sets a Provider's gauge from the status stored when
// its pass ended.
func SetProviderReady(namespace, name string, ready bool) {
	ProviderReady.WithLabelValues(namespace, name).Set(flag(ready))
}

// DeleteProvider drops the series of a Provider that is gone.
func DeleteProvider(namespace, name string) {
	ProviderReady.DeleteLabelValues(namespace, name)
}

// SetPromptPackValid sets a PromptPack's gauge from the status stored
// when its pass ended, and creates its failure counters at 0, so that
// increase() sees the first failure.
func SetPromptPackValid(namespace, name string, valid bool) {
	PromptPackValid.WithLabelValues(namespace, name).Set(flag(valid))
	for _, stage := range []string{StageSource, StageSchema} {
		PromptPackValidationFailures.WithLabelValues(namespace, name, stage)
	}
}

// CountPromptPackFailures counts the failures a stored status change
// shows (PromptPackFailures), once each.
func CountPromptPackFailures(namespace, name string, before, after []metav1.Condition) {
	for _, stage := range PromptPackFailures(before, after) {
		PromptPackValidationFailures.WithLabelValues(namespace, name, stage).Inc()
	}
}

// DeletePromptPack drops the series of a PromptPack that is gone or being
// deleted.
func DeletePromptPack(namespace, name string) {
	PromptPackValid.DeleteLabelValues(namespace, name)
	for _, stage := range []string{StageSource, StageSchema} {
		PromptPackValidationFailures.DeleteLabelValues(namespace, name, stage)
	}
}
