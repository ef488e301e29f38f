// Package promptpack is the PromptPack controller: it validates each
// published version (source, then schema), records its content digest and
// decides, among the sibling versions of its pack name, whether it serves
// its channel (Active) or not (Superseded). The decision is the pure
// function Decide; Reconciler only gathers the snapshot and writes the
// result.
package promptpack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Pack is the PromptPack being reconciled.
	Pack *omniav1.PromptPack
	// ConfigMap is the ConfigMap named by spec.source.configMapRef, nil
	// when it does not exist (or the source is not a ConfigMap).
	ConfigMap *corev1.ConfigMap
	// Siblings are the other PromptPacks of the same namespace and pack
	// name, in any order; Pack itself may be included and is skipped.
	Siblings []omniav1.PromptPack
	// Agents are the AgentRuntimes of the namespace whose promptPackRef
	// names the pack.
	Agents []omniav1.AgentRuntime
	// Now stamps lastUpdated and condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes and returns.
type Decision struct {
	// Status is the complete desired status.
	Status omniav1.PromptPackStatus
	// Events are emitted on the PromptPack, once per condition transition.
	Events []kubeutil.Event
	// Changed reports whether Status differs from the stored status; only
	// then is it written, so an idle pack costs no API call.
	Changed bool
	// Retry, when set, is returned from Reconcile so controller-runtime
	// retries with backoff: the source names a ConfigMap that does not
	// exist. Problems in the content wait for the ConfigMap watch instead.
	Retry error
}

// Decide computes a PromptPack's status from a snapshot.
func Decide(s Snapshot, v Validator) Decision {
	p := s.Pack
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	d := &decider{s: s, st: &st}

	ver, verErr := p.ParsedVersion()
	if verErr == nil {
		st.Channel = ver.Channel()
	}

	switch {
	case p.IsLive():
		d.live()
	case verErr != nil:
		// Admission refuses such versions; a stored one is still judged.
		d.sourceOK("source accepted")
		d.schemaFailed(fmt.Sprintf("spec.version: %v", verErr))
	default:
		d.configMap(v, ver)
	}
	changed := !statusEqual(p.Status, st)
	if changed {
		now := s.Now
		st.LastUpdated = &now
	}
	return Decision{Status: st, Events: d.events, Changed: changed, Retry: d.retry}
}

type decider struct {
	s      Snapshot
	st     *omniav1.PromptPackStatus
	events []kubeutil.Event
	retry  error
}

func (d *decider) set(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return kubeutil.SetCondition(&d.st.Conditions, d.s.Pack.Generation, d.s.Now, typ, status, reason, msg)
}

func (d *decider) warn(changed bool, reason, msg string) {
	if changed {
		d.events = append(d.events, kubeutil.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: kubeutil.Truncate(msg, 1000)})
	}
}

// live judges a live source from the spec alone: admission already checked
// the URL, and the content is the runtime's to fetch. A live version is
// never compared with its siblings.
func (d *decider) live() {
	p := d.s.Pack
	d.set(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonLiveSource,
		fmt.Sprintf("live source %s is fetched by the agent runtime", p.Spec.Source.Live.URL))
	d.set(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonLiveSource,
		"live content is validated by the agent runtime when it fetches it")
	meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionSuperseded)
	d.st.ContentDigest = ""
	d.st.Phase = omniav1.PromptPackPhaseActive
	d.st.ActiveVersion = ptr(p.Spec.Version)
	d.skills()
	d.agents(servesAll)
}

func (d *decider) configMap(v Validator, ver omniav1.Version) {
	p := d.s.Pack
	ref := p.Spec.Source.ConfigMapRef
	switch {
	case p.Spec.Source.Type != omniav1.SourceTypeConfigMap:
		d.sourceFailed(fmt.Sprintf("unsupported source type %q", p.Spec.Source.Type))
		return
	case ref == nil:
		d.sourceFailed("source.configMapRef is not set")
		return
	case d.s.ConfigMap == nil:
		msg := fmt.Sprintf("ConfigMap %q not found in namespace %q", ref.Name, p.Namespace)
		d.sourceFailed(msg)
		d.retry = fmt.Errorf("validate source of PromptPack %s/%s: %s", p.Namespace, p.Name, msg)
		return
	}
	content, ok := d.s.ConfigMap.Data[omniav1.PackJSONKey]
	if !ok {
		d.sourceFailed(fmt.Sprintf("ConfigMap %q has no %q key in data", ref.Name, omniav1.PackJSONKey))
		return
	}
	d.sourceOK(fmt.Sprintf("ConfigMap %q has a %q key", ref.Name, omniav1.PackJSONKey))
	if err := v.Validate([]byte(content)); err != nil {
		d.schemaFailed(err.Error())
		return
	}
	d.set(omniav1.ConditionSchemaValid, metav1.ConditionTrue, omniav1.ReasonSchemaValid, "pack.json conforms to the PromptPack schema")
	sum := sha256.Sum256([]byte(content))
	d.st.ContentDigest = "sha256:" + hex.EncodeToString(sum[:])
	d.skills()

	r := Rank(p, ver, d.s.Siblings)
	if r.Active() {
		d.st.Phase = omniav1.PromptPackPhaseActive
		d.st.ActiveVersion = ptr(p.Spec.Version)
		d.set(omniav1.ConditionSuperseded, metav1.ConditionFalse, omniav1.ReasonIsChannelMax,
			fmt.Sprintf("version %s serves the %s", p.Spec.Version, r.ServedChannels()))
	} else {
		d.st.Phase = omniav1.PromptPackPhaseSuperseded
		d.st.ActiveVersion = nil
		reason := omniav1.ReasonNewerVersionPublished
		msg := fmt.Sprintf("version %s (PromptPack %s) serves the %s channel", r.Winner.Spec.Version, r.Winner.Name, ver.Channel())
		if r.Duplicate {
			reason = omniav1.ReasonDuplicateVersion
			msg = fmt.Sprintf("PromptPack %s has version %s of equal precedence and was created later, so it serves the %s channel",
				r.Winner.Name, r.Winner.Spec.Version, ver.Channel())
		}
		changed := d.set(omniav1.ConditionSuperseded, metav1.ConditionTrue, reason, msg)
		if r.Duplicate {
			d.warn(changed, omniav1.EventDuplicateVersion, msg)
		}
	}
	d.agents(r.serves)
}

func (d *decider) sourceOK(msg string) {
	d.set(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonSourceValid, msg)
}

// sourceFailed marks the source invalid; with nothing to validate, the
// schema condition goes Unknown.
func (d *decider) sourceFailed(msg string) {
	changed := d.set(omniav1.ConditionSourceValid, metav1.ConditionFalse, omniav1.ReasonSourceValidationFailed, msg)
	d.set(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid, "source is invalid; nothing to validate")
	d.failed()
	d.warn(changed, omniav1.EventSourceValidationFailed, msg)
}

func (d *decider) schemaFailed(msg string) {
	changed := d.set(omniav1.ConditionSchemaValid, metav1.ConditionFalse, omniav1.ReasonSchemaValidationFailed, msg)
	d.failed()
	d.warn(changed, omniav1.EventSchemaValidationFailed, msg)
}

// failed clears everything a failed version must not claim: it serves no
// channel and notifies no agent.
func (d *decider) failed() {
	d.st.Phase = omniav1.PromptPackPhaseFailed
	d.st.ActiveVersion = nil
	d.st.ContentDigest = ""
	for _, t := range []string{omniav1.ConditionSuperseded, omniav1.ConditionAgentsNotified} {
		meta.RemoveStatusCondition(&d.st.Conditions, t)
	}
}

// skills reports skill resolution. SkillSources (and the workspace content
// storage they sync into) do not exist in this platform yet, so any
// declared skill is reported unresolvable instead of silently ignored.
func (d *decider) skills() {
	if len(d.s.Pack.Spec.Skills) == 0 {
		d.set(omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonNoSkills, "the pack declares no skills")
		return
	}
	d.set(omniav1.ConditionSkillsResolved, metav1.ConditionFalse, omniav1.ReasonContentStorageUnavailable,
		fmt.Sprintf("%d skill source(s) declared, but this operator has no skill content storage", len(d.s.Pack.Spec.Skills)))
}

// agents sets AgentsNotified: how many AgentRuntimes reference this
// version — a pin on a semver-equal version, or a track of a channel this
// version serves. Nothing is pushed to them; they watch PromptPacks.
func (d *decider) agents(serves func(omniav1.PromptPackChannel) bool) {
	n := CountAgents(d.s.Pack, d.s.Agents, serves)
	if n == 0 {
		d.set(omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonNoAgentsToNotify, "no AgentRuntime references this version")
		return
	}
	d.set(omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonAgentsNotified,
		fmt.Sprintf("%d AgentRuntime(s) reference this version", n))
}

func servesAll(omniav1.PromptPackChannel) bool { return true }

// CountAgents counts the AgentRuntimes that reference pack: same pack name
// and either a semver-equal version pin or a channel serves reports true.
func CountAgents(pack *omniav1.PromptPack, agents []omniav1.AgentRuntime, serves func(omniav1.PromptPackChannel) bool) int {
	n := 0
	for i := range agents {
		ref := agents[i].Spec.PromptPackRef
		if agents[i].Namespace != pack.Namespace || ref.Name != pack.Spec.PackName {
			continue
		}
		if ref.Version != nil {
			if omniav1.VersionsEqual(*ref.Version, pack.Spec.Version) {
				n++
			}
			continue
		}
		if serves(ref.Channel()) {
			n++
		}
	}
	return n
}

// statusEqual compares two statuses ignoring lastUpdated, so a pass that
// changes nothing writes nothing (and triggers no watch event).
func statusEqual(a, b omniav1.PromptPackStatus) bool {
	a.LastUpdated, b.LastUpdated = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

func ptr[T any](v T) *T { return &v }
