// Package promptpack is the PromptPack controller: it validates each
// published version (source, then schema), pins its content digest and
// reports a later edit of the content (ContentDrifted),
// resolves its skills against the SkillSources of its namespace and
// decides, among the sibling versions of its pack name, whether it serves
// its channel (Active) or not (Superseded). The decision is the pure
// function Decide; Reconciler only gathers the snapshot and writes the
// result.
package promptpack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/safeurl"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Pack is the PromptPack being reconciled.
	Pack *omniav1.PromptPack
	// ConfigMap is the ConfigMap named by spec.source.configMapRef, nil
	// when it does not exist (or the source is not a ConfigMap). Source,
	// when set, is used instead.
	ConfigMap *corev1.ConfigMap
	// Source is what ReadSource made of that ConfigMap, read by an
	// earlier pass while it is unchanged; nil judges ConfigMap.
	Source *Source
	// Siblings are the other PromptPacks of the same namespace and pack
	// name, in any order; Pack itself may be included and is skipped.
	Siblings []omniav1.PromptPack
	// Agents are the AgentRuntimes of the namespace whose promptPackRef
	// names the pack.
	Agents []omniav1.AgentRuntime
	// SkillSources are the SkillSources spec.skills names, by name; a
	// name that is absent or maps to nil does not exist.
	SkillSources map[string]*omniav1.SkillSource
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
	// retries with backoff: the source names a ConfigMap, or spec.skills a
	// SkillSource, that does not exist. Problems in the content wait for
	// the ConfigMap and SkillSource watches instead.
	Retry error
}

// Decide computes a PromptPack's status from a snapshot.
func Decide(s Snapshot, v Validator) Decision {
	p := s.Pack
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	d := &decider{s: s, st: &st, Judgement: kubeutil.Judgement{Conditions: &st.Conditions, Generation: p.Generation, Now: s.Now, MaxMessage: 1000}}

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
	return Decision{Status: st, Events: d.Events, Changed: changed, Retry: d.retry}
}

// decider judges one pack's status; event messages are capped at 1000
// bytes, as a validation error can quote much of the pack.
type decider struct {
	kubeutil.Judgement
	s     Snapshot
	st    *omniav1.PromptPackStatus
	retry error
}

// live judges a live source from the spec alone: admission already checked
// the URL, and the content is the runtime's to fetch. A live version is
// never compared with its siblings.
func (d *decider) live() {
	p := d.s.Pack
	d.Set(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonLiveSource,
		fmt.Sprintf("live source %s is fetched by the agent runtime", safeurl.Parse(p.Spec.Source.Live.URL)))
	d.Set(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonLiveSource,
		"live content is validated by the agent runtime when it fetches it")
	meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionSuperseded)
	meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionContentDrifted)
	d.st.ContentDigest = ""
	d.st.Phase = omniav1.PromptPackPhaseActive
	d.st.ActiveVersion = ptr(p.Spec.Version)
	d.skills(nil)
	d.agents(servesAll)
}

func (d *decider) configMap(v Validator, ver omniav1.Version) {
	p := d.s.Pack
	ref := p.Spec.Source.ConfigMapRef
	switch {
	case p.Spec.Source.Type != omniav1.SourceTypeConfigMap:
		d.sourceFailed(fmt.Sprintf("unsupported source type %q", p.Spec.Source.Type))
		d.drift("", "")
		return
	case ref == nil:
		d.sourceFailed("source.configMapRef is not set")
		d.drift("", "")
		return
	}
	src := d.s.Source
	if src == nil {
		read := ReadSource(d.s.ConfigMap, v)
		src = &read
	}
	switch {
	case !src.Found:
		msg := fmt.Sprintf("ConfigMap %q not found in namespace %q", ref.Name, p.Namespace)
		d.sourceFailed(msg)
		d.drift(ref.Name, "")
		d.retry = fmt.Errorf("validate source of PromptPack %s/%s: %s", p.Namespace, p.Name, msg)
		return
	case !src.HasKey:
		d.sourceFailed(fmt.Sprintf("ConfigMap %q has no %q key in data", ref.Name, omniav1.PackJSONKey))
		d.drift(ref.Name, "")
		return
	}
	d.sourceOK(fmt.Sprintf("ConfigMap %q has a %q key", ref.Name, omniav1.PackJSONKey))
	if src.SchemaErr != "" {
		d.schemaFailed(src.SchemaErr)
		d.drift(ref.Name, src.Digest)
		return
	}
	d.Set(omniav1.ConditionSchemaValid, metav1.ConditionTrue, omniav1.ReasonSchemaValid, "pack.json conforms to the PromptPack schema")
	if d.st.ContentDigest == "" {
		d.st.ContentDigest = src.Digest // the first validation pins the content
	}
	d.drift(ref.Name, src.Digest)
	d.skills(src.Tools)

	r := Rank(p, ver, d.s.Siblings)
	if r.Active() {
		d.st.Phase = omniav1.PromptPackPhaseActive
		d.st.ActiveVersion = ptr(p.Spec.Version)
		d.Set(omniav1.ConditionSuperseded, metav1.ConditionFalse, omniav1.ReasonIsChannelMax,
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
		changed := d.Set(omniav1.ConditionSuperseded, metav1.ConditionTrue, reason, msg)
		if r.Duplicate {
			d.WarnOn(changed, omniav1.EventDuplicateVersion, msg)
		}
	}
	d.agents(r.serves)
}

func (d *decider) sourceOK(msg string) {
	d.Set(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonSourceValid, msg)
}

// sourceFailed marks the source invalid; with nothing to validate, the
// schema condition goes Unknown.
func (d *decider) sourceFailed(msg string) {
	changed := d.Set(omniav1.ConditionSourceValid, metav1.ConditionFalse, omniav1.ReasonSourceValidationFailed, msg)
	d.Set(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid, "source is invalid; nothing to validate")
	d.failed()
	d.WarnOn(changed, omniav1.EventSourceValidationFailed, msg)
}

func (d *decider) schemaFailed(msg string) {
	changed := d.Set(omniav1.ConditionSchemaValid, metav1.ConditionFalse, omniav1.ReasonSchemaValidationFailed, msg)
	d.failed()
	d.WarnOn(changed, omniav1.EventSchemaValidationFailed, msg)
}

// failed clears everything a failed version must not claim: it serves no
// channel, notifies no agent and, never reaching "resolve skills", offers
// no skills. A pinned digest stays: it says what the version was
// validated with, so content that comes back different is still caught.
func (d *decider) failed() {
	d.st.Phase = omniav1.PromptPackPhaseFailed
	d.st.ActiveVersion = nil
	d.st.Skills = nil
	for _, t := range []string{omniav1.ConditionSuperseded, omniav1.ConditionAgentsNotified,
		omniav1.ConditionSkillsResolved, omniav1.ConditionSkillsValid, omniav1.ConditionSkillToolsResolved} {
		meta.RemoveStatusCondition(&d.st.Conditions, t)
	}
}

// ContentDigest is the digest a pack.json is pinned by: "sha256:<hex>".
func ContentDigest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// drift judges the content of ConfigMap cmName (its digest now; "" when
// pack.json cannot be read) against the digest pinned at the version's
// first validation. A published version's content must not change, and
// an edit is reported rather than adopted: adopting it would make the
// edited content look like the version that was validated.
func (d *decider) drift(cmName, now string) {
	pinned := d.st.ContentDigest
	switch {
	case pinned == "":
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionContentDrifted)
	case now == "":
		d.Set(omniav1.ConditionContentDrifted, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid,
			fmt.Sprintf("pack.json cannot be read; version %s was validated with %s", d.s.Pack.Spec.Version, pinned))
	case now == pinned:
		d.Set(omniav1.ConditionContentDrifted, metav1.ConditionFalse, omniav1.ReasonDigestMatches,
			fmt.Sprintf("pack.json of ConfigMap %q has digest %s, the one version %s was validated with", cmName, pinned, d.s.Pack.Spec.Version))
	default:
		msg := fmt.Sprintf("pack.json of ConfigMap %q was edited: its digest is %s, not %s, the one version %s was validated with; "+
			"publish the change as a new PromptPack version, or restore the content", cmName, now, pinned, d.s.Pack.Spec.Version)
		d.WarnOn(d.Set(omniav1.ConditionContentDrifted, metav1.ConditionTrue, omniav1.ReasonDigestMismatch, msg), omniav1.EventContentDrifted, msg)
	}
}

// skills sets the three skill conditions from ResolveSkills and records
// the resolved skills while none of them is False. tools are the keys of
// pack.json's top-level tools object; nil for a live source, whose content
// the controller never sees. Unresolved skills do not fail the version:
// a validated version keeps serving, and the skill conditions say what is
// missing.
func (d *decider) skills(tools map[string]bool) {
	p := d.s.Pack
	d.st.Skills = nil
	if len(p.Spec.Skills) == 0 {
		const msg = "the pack declares no skills"
		d.Set(omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonNoSkills, msg)
		d.Set(omniav1.ConditionSkillsValid, metav1.ConditionTrue, omniav1.ReasonNoCollisions, msg)
		d.Set(omniav1.ConditionSkillToolsResolved, metav1.ConditionTrue, omniav1.ReasonAllToolsResolved, msg)
		return
	}
	res := ResolveSkills(p.Spec.Skills, d.s.SkillSources, tools)
	ok := true
	if len(res.Problems) > 0 {
		ok = false
		d.Set(omniav1.ConditionSkillsResolved, metav1.ConditionFalse, omniav1.ReasonLookupFailed, truncate.String(strings.Join(res.Problems, "; "), 32<<10))
	} else {
		d.Set(omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonAllSkillsResolved,
			fmt.Sprintf("%d skill(s) resolved from %d SkillSource(s)", len(res.Skills), res.Sources))
	}
	if len(res.Missing) > 0 && d.retry == nil {
		d.retry = fmt.Errorf("resolve skills of PromptPack %s/%s: SkillSource(s) %s not found", p.Namespace, p.Name, strings.Join(res.Missing, ", "))
	}
	if len(res.Collisions) > 0 {
		ok = false
		d.Set(omniav1.ConditionSkillsValid, metav1.ConditionFalse, omniav1.ReasonNameCollision, truncate.String(strings.Join(res.Collisions, "; "), 32<<10))
	} else {
		d.Set(omniav1.ConditionSkillsValid, metav1.ConditionTrue, omniav1.ReasonNoCollisions, "no two SkillSources supply a skill of the same name")
	}
	switch {
	case tools == nil:
		d.Set(omniav1.ConditionSkillToolsResolved, metav1.ConditionUnknown, omniav1.ReasonLiveSource,
			"the tools of a live pack are checked by the agent runtime when it fetches the content")
	case len(res.UnknownTools) > 0:
		ok = false
		d.Set(omniav1.ConditionSkillToolsResolved, metav1.ConditionFalse, omniav1.ReasonUnknownTool,
			truncate.String("skills allow tools pack.json does not declare: "+strings.Join(res.UnknownTools, ", "), 32<<10))
	default:
		d.Set(omniav1.ConditionSkillToolsResolved, metav1.ConditionTrue, omniav1.ReasonAllToolsResolved, "every tool a skill allows is declared in pack.json")
	}
	if ok {
		d.st.Skills = res.Skills
	}
}

// SkillResolution is the outcome of resolving a pack's spec.skills.
type SkillResolution struct {
	// Skills are the skills selected, sorted by name; a skill selected
	// twice from the same source appears once, under the group of the
	// first reference.
	Skills []omniav1.ResolvedSkill
	// Sources counts the distinct SkillSources skills were taken from.
	Sources int
	// Problems are the lookup failures, in spec order: a missing or
	// unsynced SkillSource, or an included skill it does not have.
	Problems []string
	// Missing are the names of SkillSources that do not exist, in spec
	// order without duplicates.
	Missing []string
	// Collisions describe each skill name supplied by two or more
	// SkillSources, sorted.
	Collisions []string
	// UnknownTools are the "skill:tool" pairs whose tool is not declared,
	// sorted; empty when tools is nil.
	UnknownTools []string
}

// ResolveSkills resolves refs against the SkillSources of the pack's
// namespace (sources, by name) and checks each selected skill's allowed
// tools against tools, the keys of pack.json's top-level tools object (nil
// skips the check).
func ResolveSkills(refs []omniav1.SkillRef, sources map[string]*omniav1.SkillSource, tools map[string]bool) SkillResolution {
	var res SkillResolution
	type pick struct {
		skill omniav1.SkillSourceSkill
		group string
	}
	picked := map[string]map[string]pick{} // source -> skill name -> pick
	reported := map[string]bool{}
	for _, ref := range refs {
		src, found := sources[ref.Source]
		switch {
		case !found || src == nil:
			if !reported[ref.Source] {
				reported[ref.Source] = true
				res.Problems = append(res.Problems, fmt.Sprintf("SkillSource %q not found", ref.Source))
				res.Missing = append(res.Missing, ref.Source)
			}
			continue
		case !src.IsSynced():
			if !reported[ref.Source] {
				reported[ref.Source] = true
				res.Problems = append(res.Problems, fmt.Sprintf("SkillSource %q has no synced content yet", ref.Source))
			}
			continue
		}
		group := ref.MountAs
		if group == "" {
			group = ref.Source
		}
		byName := make(map[string]omniav1.SkillSourceSkill, len(src.Status.Skills))
		for _, sk := range src.Status.Skills {
			byName[sk.Name] = sk
		}
		selected := src.Status.Skills
		if len(ref.Include) > 0 {
			selected = nil
			for _, name := range ref.Include {
				sk, ok := byName[name]
				if !ok {
					res.Problems = append(res.Problems, fmt.Sprintf("SkillSource %q has no skill %q", ref.Source, name))
					continue
				}
				selected = append(selected, sk)
			}
		}
		if picked[ref.Source] == nil {
			picked[ref.Source] = map[string]pick{}
		}
		for _, sk := range selected {
			if _, dup := picked[ref.Source][sk.Name]; !dup {
				picked[ref.Source][sk.Name] = pick{skill: sk, group: group}
			}
		}
	}

	bySkill := map[string][]string{} // skill name -> sources
	unknown := map[string]bool{}
	for source, skills := range picked {
		if len(skills) > 0 {
			res.Sources++
		}
		for name, pk := range skills {
			bySkill[name] = append(bySkill[name], source)
			res.Skills = append(res.Skills, omniav1.ResolvedSkill{Name: name, Source: source, Group: pk.group, Key: pk.skill.Key})
			if tools == nil {
				continue
			}
			for _, t := range pk.skill.AllowedTools {
				if !tools[t] {
					unknown[name+":"+t] = true
				}
			}
		}
	}
	for name, srcs := range bySkill {
		if len(srcs) > 1 {
			sort.Strings(srcs)
			res.Collisions = append(res.Collisions, fmt.Sprintf("skill %q is supplied by SkillSources %s", name, strings.Join(srcs, ", ")))
		}
	}
	sort.Strings(res.Collisions)
	for pair := range unknown {
		res.UnknownTools = append(res.UnknownTools, pair)
	}
	sort.Strings(res.UnknownTools)
	sort.Slice(res.Skills, func(i, j int) bool {
		a, b := res.Skills[i], res.Skills[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Source < b.Source
	})
	return res
}

// declaredTools returns the keys of pack.json's top-level tools object.
// The content passed the schema, which makes tools an object when present;
// anything else yields no tools, so every allowed tool is reported.
func declaredTools(content string) map[string]bool {
	var doc struct {
		Tools map[string]json.RawMessage `json:"tools"`
	}
	out := map[string]bool{}
	if json.Unmarshal([]byte(content), &doc) == nil {
		for k := range doc.Tools {
			out[k] = true
		}
	}
	return out
}

// agents sets AgentsNotified: how many AgentRuntimes reference this
// version — a pin on a semver-equal version, or a track of a channel this
// version serves. Nothing is pushed to them; they watch PromptPacks.
func (d *decider) agents(serves func(omniav1.PromptPackChannel) bool) {
	n := CountAgents(d.s.Pack, d.s.Agents, serves)
	if n == 0 {
		d.Set(omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonNoAgentsToNotify, "no AgentRuntime references this version")
		return
	}
	d.Set(omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonAgentsNotified,
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
