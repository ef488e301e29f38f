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
)

// This file hands the skills of the PromptPack version an agent runs to
// its pods (docs/omnia-controllers.md, "Skills reach the pod"): the
// pack's status.skills, each checked against its SkillSource, become one
// projected volume of the SkillSources' ConfigMaps, by reference, so the
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
	// unusable names what was left out, and why, sorted.
	unusable []string
}

// BuildSkillSet judges the skills pack resolved to (status.skills, which
// its controller sets only when the whole set resolved) against sources,
// the SkillSources of the pack's namespace by name (nil: missing). A
// skill is mounted only when its SkillSource is Ready for its current
// spec and still offers it under the same key: the kubelet would fail to
// start a pod that projects a key the ConfigMap lacks. The rest are left
// out and named. nil when the pack declares no skills.
func BuildSkillSet(pack *omniav1.PromptPack, sources map[string]*omniav1.SkillSource) *SkillSet {
	if pack == nil || len(pack.Spec.Skills) == 0 {
		return nil
	}
	ss := &SkillSet{}
	bad := map[string]bool{}
	judge := func(name string) *omniav1.SkillSource {
		src := sources[name]
		why := ""
		switch {
		case src == nil:
			why = fmt.Sprintf("SkillSource %q does not exist", name)
		case !src.IsSynced():
			why = fmt.Sprintf("SkillSource %q is not Ready (phase %s)", name, phaseOr(string(src.Status.Phase)))
			if c := meta.FindStatusCondition(src.Status.Conditions, omniav1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
				why += ": " + c.Reason
			}
		}
		if why != "" {
			if !bad[name] {
				bad[name] = true
				ss.unusable = append(ss.unusable, why)
			}
			return nil
		}
		return src
	}
	if len(pack.Status.Skills) == 0 {
		// The pack's controller offers no partial set: name why, and each
		// source at fault.
		why := fmt.Sprintf("PromptPack %s offers no resolved skills", pack.Name)
		for _, typ := range []string{omniav1.ConditionSkillsResolved, omniav1.ConditionSkillsValid, omniav1.ConditionSkillToolsResolved} {
			if c := meta.FindStatusCondition(pack.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionFalse {
				why += " (" + typ + ": " + c.Message + ")"
				break
			}
		}
		ss.unusable = append(ss.unusable, why)
		for _, ref := range pack.Spec.Skills {
			judge(ref.Source)
		}
	}
	h := sha256.New()
	used := map[string]bool{}
	for _, rs := range pack.Status.Skills {
		src := judge(rs.Source)
		if src == nil {
			continue
		}
		if !offers(src, rs) {
			ss.unusable = append(ss.unusable, fmt.Sprintf("SkillSource %q no longer offers skill %q under key %q", rs.Source, rs.Name, rs.Key))
			continue
		}
		if why := skillPathProblem(rs); why != "" {
			ss.unusable = append(ss.unusable, why)
			continue
		}
		m := skillMount{configMap: src.Spec.ConfigMapRef.Name, key: rs.Key, path: rs.Group + "/" + rs.Name + "/" + omniav1.SkillDocumentKey}
		ss.mounts = append(ss.mounts, m)
		fmt.Fprintf(h, "skill\x00%s\x00%s\x00%s\x00%s\x00", rs.Source, m.configMap, m.key, m.path)
		used[rs.Source] = true
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
	sort.Slice(ss.mounts, func(i, j int) bool { return ss.mounts[i].path < ss.mounts[j].path })
	sort.Strings(ss.unusable)
	if len(ss.mounts) > 0 {
		ss.Digest = hex.EncodeToString(h.Sum(nil))
	}
	return ss
}

// offers reports whether the SkillSource lists the skill under its key.
func offers(src *omniav1.SkillSource, rs omniav1.ResolvedSkill) bool {
	for _, s := range src.Status.Skills {
		if s.Name == rs.Name {
			return s.Key == rs.Key
		}
	}
	return false
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
// resolved; a pack without skills carries no condition.
func (r *resolver) skills() {
	ss := BuildSkillSet(r.res.Pack, r.in.SkillSources)
	r.res.Skills = ss
	if ss == nil {
		meta.RemoveStatusCondition(r.conds, omniav1.ConditionSkillsReady)
		return
	}
	if len(ss.unusable) == 0 {
		r.set(omniav1.ConditionSkillsReady, metav1.ConditionTrue, omniav1.ReasonSkillsMounted, fmt.Sprintf("%d skill(s) mounted", len(ss.mounts)))
		return
	}
	msg := fmt.Sprintf("%d skill(s) mounted; left out: %s", len(ss.mounts), strings.Join(ss.unusable, "; "))
	if r.set(omniav1.ConditionSkillsReady, metav1.ConditionFalse, omniav1.ReasonSkillsNotReady, msg) {
		r.res.Events = append(r.res.Events, Event{Reason: omniav1.EventSkillsNotReady, Message: msg})
	}
}

// skillSources reads the SkillSources the agent's pack versions name, in
// spec or status, from the cache; one not found is judged by
// BuildSkillSet.
func (r *Reconciler) skillSources(ctx context.Context, in *Inputs) error {
	for i := range in.Packs {
		p := &in.Packs[i]
		names := make([]string, 0, len(p.Spec.Skills)+len(p.Status.Skills))
		for _, ref := range p.Spec.Skills {
			names = append(names, ref.Source)
		}
		for _, rs := range p.Status.Skills {
			names = append(names, rs.Source)
		}
		for _, name := range names {
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
