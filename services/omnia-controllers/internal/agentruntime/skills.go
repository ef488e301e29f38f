package agentruntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
)

// This file hands the skills of the PromptPack version an agent runs to
// its pods (docs/omnia-controllers.md, "Skills reach the pod"): the
// pack's spec.skills, resolved against the SkillSources as the PromptPack
// controller resolves them, become one projected volume of the SkillSources' ConfigMaps, by reference, so the
// runtime finds every skill at <SkillsMountPath>/<group>/<name>/SKILL.md.
// The content is never copied: the kubelet reads it.

// Where the runtime container finds its skills.
const (
	// SkillsVolumeName is the pod volume holding the skill documents.
	SkillsVolumeName = "omnia-skills"
	// SkillsMountPath is where that volume is mounted, read-only.
	SkillsMountPath = "/etc/omnia/skills"
	// EnvSkillsPath names SkillsMountPath to the runtime.
	EnvSkillsPath = "OMNIA_SKILLS_PATH"
)

// skillMount is one skill document: the key of a ConfigMap and its path
// in the skills volume.
type skillMount struct {
	configMap string
	key       string
	path      string
}

// SkillSet is what the agent's pods get of their pack's skills.
type SkillSet struct {
	// Digest hashes the mounted skills and the content checksums of their
	// SkillSources, for the pod template's config hash; empty when nothing
	// is mounted.
	Digest string
	// mounts are the skill documents to mount, by path.
	mounts []skillMount
	// unusable says why no skill is mounted, sorted; empty when all are.
	unusable []string
	// pending names the SkillSources their controller has not judged
	// yet (for their current spec): the agent waits for them.
	pending []string
}

// BuildSkillSet resolves the skills of pack's spec.skills against
// sources, the SkillSources of its namespace by name (nil: missing), with
// the PromptPack controller's own resolution (promptpack.ResolveSkills),
// so the pods get the set the pack's status.skills lists. It resolves
// from the agent's own read of the SkillSources rather than copying
// status.skills: that status is written by another controller and lags
// the SkillSources the agent sees, so an agent built between the two
// would roll twice. As in the pack's status, a partial or ambiguous set
// is never offered: a SkillSource missing or not Ready, an included skill
// it lacks, a name two sources supply, or a skill allowing a tool
// pack.json does not declare (the pack's SkillToolsResolved) mounts none,
// and unusable says why. nil when the pack declares no skills.
func BuildSkillSet(pack *omniav1.PromptPack, sources map[string]*omniav1.SkillSource) *SkillSet {
	if pack == nil || len(pack.Spec.Skills) == 0 {
		return nil
	}
	ss := &SkillSet{}
	seen := map[string]bool{}
	for _, ref := range pack.Spec.Skills {
		src := sources[ref.Source]
		if src == nil || seen[ref.Source] || src.IsSynced() {
			continue
		}
		seen[ref.Source] = true
		if src.Status.ObservedGeneration != src.Generation || src.Status.Phase == "" || src.Status.Phase == omniav1.SkillSourcePhasePending {
			ss.pending = append(ss.pending, ref.Source)
		}
	}
	if len(ss.pending) > 0 {
		return ss
	}
	res := promptpack.ResolveSkills(pack.Spec.Skills, sources, nil)
	ss.unusable = append(append(ss.unusable, res.Problems...), res.Collisions...)
	if c := meta.FindStatusCondition(pack.Status.Conditions, omniav1.ConditionSkillToolsResolved); c != nil && c.Status == metav1.ConditionFalse {
		ss.unusable = append(ss.unusable, fmt.Sprintf("PromptPack %s: %s", pack.Name, c.Message))
	}
	var mounts []skillMount
	used := map[string]bool{}
	for _, rs := range res.Skills {
		if why := skillPathProblem(rs); why != "" {
			ss.unusable = append(ss.unusable, why)
			continue
		}
		m := skillMount{configMap: sources[rs.Source].Spec.ConfigMapRef.Name, key: rs.Key, path: rs.Group + "/" + rs.Name + "/" + omniav1.SkillDocumentKey}
		mounts = append(mounts, m)
		used[rs.Source] = true
	}
	sort.Strings(ss.unusable)
	if len(ss.unusable) > 0 || len(mounts) == 0 {
		return ss
	}
	sort.Slice(mounts, func(i, j int) bool { return mounts[i].path < mounts[j].path })
	ss.mounts = mounts
	h := sha256.New()
	for _, m := range mounts {
		fmt.Fprintf(h, "skill\x00%s\x00%s\x00%s\x00", m.configMap, m.key, m.path)
	}
	srcs := make([]string, 0, len(used))
	for s := range used {
		srcs = append(srcs, s)
	}
	sort.Strings(srcs)
	// The content: a skill document edited in place keeps its key and
	// path, so only its source's checksum tells the pods to roll.
	for _, s := range srcs {
		fmt.Fprintf(h, "source\x00%s\x00%s\x00", s, sources[s].Status.ContentChecksum)
	}
	ss.Digest = hex.EncodeToString(h.Sum(nil))
	return ss
}

// skillPathProblem says why a resolved skill cannot be a path of the
// volume ("" when it can): its group and name must be single path
// segments, as their schemas require; status is still outside input.
func skillPathProblem(rs omniav1.ResolvedSkill) string {
	for _, part := range []struct{ what, v string }{{"group", rs.Group}, {"name", rs.Name}} {
		if errs := validation.IsDNS1123Subdomain(part.v); len(errs) > 0 {
			return fmt.Sprintf("skill %q of SkillSource %q: %s %q is not a directory name: %s", rs.Name, rs.Source, part.what, part.v, strings.Join(errs, "; "))
		}
	}
	return ""
}

// volume is the skills volume: one projection per ConfigMap, its skill
// keys mapped to <group>/<name>/SKILL.md. Optional, so a key removed
// after this template was built leaves its skill out of a new pod instead
// of keeping the pod from starting; the next pass rolls the pods without
// it.
func (ss *SkillSet) volume() corev1.Volume {
	var srcs []corev1.VolumeProjection
	byCM := map[string]int{}
	for _, m := range ss.mounts {
		i, ok := byCM[m.configMap]
		if !ok {
			i = len(srcs)
			byCM[m.configMap] = i
			srcs = append(srcs, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: m.configMap}, Optional: ptr(true)}})
		}
		srcs[i].ConfigMap.Items = append(srcs[i].ConfigMap.Items, corev1.KeyToPath{Key: m.key, Path: m.path})
	}
	return corev1.Volume{Name: SkillsVolumeName, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: srcs, DefaultMode: ptr(int32(0o440))}}}
}

// mounted reports whether the pods get a skills volume.
func (ss *SkillSet) mounted() bool { return ss != nil && len(ss.mounts) > 0 }

// skills sets SkillsReady and the resolution's skill set once the pack
// resolved; a pack without skills carries no condition. It reports
// false, the agent Pending, while a SkillSource the pack names has not
// been judged yet: a Deployment built then would roll again moments
// later. The SkillSource watch brings the pass back.
func (r *resolver) skills() bool {
	ss := BuildSkillSet(r.res.Pack, r.in.SkillSources)
	r.res.Skills = ss
	switch {
	case ss == nil:
		meta.RemoveStatusCondition(r.conds, omniav1.ConditionSkillsReady)
	case len(ss.pending) > 0:
		return r.fail(omniav1.AgentRuntimePhasePending, false, omniav1.ConditionSkillsReady, omniav1.ReasonSkillSourcePending,
			fmt.Sprintf("waiting for SkillSource(s) %s to be synced", strings.Join(ss.pending, ", ")))
	case len(ss.unusable) == 0:
		r.set(omniav1.ConditionSkillsReady, metav1.ConditionTrue, omniav1.ReasonSkillsMounted, fmt.Sprintf("%d skill(s) mounted", len(ss.mounts)))
	default:
		msg := "no skill mounted: " + strings.Join(ss.unusable, "; ")
		if r.set(omniav1.ConditionSkillsReady, metav1.ConditionFalse, omniav1.ReasonSkillsNotReady, msg) {
			r.res.Events = append(r.res.Events, Event{Reason: omniav1.EventSkillsNotReady, Message: msg})
		}
	}
	return true
}

// skillSources reads the SkillSources the agent's pack versions name in
// spec.skills, from the cache; one not found is judged by
// BuildSkillSet.
func (r *Reconciler) skillSources(ctx context.Context, in *Inputs) error {
	for i := range in.Packs {
		p := &in.Packs[i]
		for _, ref := range p.Spec.Skills {
			name := ref.Source
			if _, done := in.SkillSources[name]; done {
				continue
			}
			src := &omniav1.SkillSource{}
			found, err := r.get(ctx, p.Namespace, name, src)
			if err != nil {
				return err
			}
			if !found {
				src = nil
			}
			in.SkillSources[name] = src
		}
	}
	return nil
}

// agentsForSkillSource maps a SkillSource to the agents whose pack name
// has a version that names it in spec.skills: its readiness and content
// checksum shape their pods.
func (r *Reconciler) agentsForSkillSource(ctx context.Context, o client.Object) []reconcile.Request {
	var packs omniav1.PromptPackList
	if err := r.Client.List(ctx, &packs, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.PackSkillSource: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "map SkillSource to PromptPacks", "skillSource", client.ObjectKeyFromObject(o))
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for i := range packs.Items {
		name := packs.Items[i].Spec.PackName
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, r.list(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.AgentPromptPack: name})...)
	}
	return out
}
