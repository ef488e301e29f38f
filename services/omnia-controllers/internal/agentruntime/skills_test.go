package agentruntime

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// skillSource is a Ready SkillSource of ConfigMap "<name>-cm" offering
// each skill under "<skill>.SKILL.md".
func skillSource(name, checksum string, skills ...string) *omniav1.SkillSource {
	s := &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1},
		Spec:   omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: name + "-cm"}},
		Status: omniav1.SkillSourceStatus{Phase: omniav1.SkillSourcePhaseReady, ObservedGeneration: 1, ContentChecksum: checksum}}
	for _, sk := range skills {
		s.Status.Skills = append(s.Status.Skills, omniav1.SkillSourceSkill{Name: sk, Key: sk + ".SKILL.md"})
	}
	return s
}

// skilled is a pack whose spec.skills take each "<source>/<skill>" from
// its source, grouped under the source's name.
func skilled(p omniav1.PromptPack, skills ...string) omniav1.PromptPack {
	at := map[string]int{}
	for _, sk := range skills {
		src, name, _ := strings.Cut(sk, "/")
		i, ok := at[src]
		if !ok {
			i = len(p.Spec.Skills)
			at[src] = i
			p.Spec.Skills = append(p.Spec.Skills, omniav1.SkillRef{Source: src})
		}
		p.Spec.Skills[i].Include = append(p.Spec.Skills[i].Include, name)
	}
	return p
}

func sources(ss ...*omniav1.SkillSource) map[string]*omniav1.SkillSource {
	out := map[string]*omniav1.SkillSource{}
	for _, s := range ss {
		out[s.Name] = s
	}
	return out
}

// items lists a skills volume's projections as "<configMap>:<key>=<path>".
func items(v corev1.Volume) []string {
	var out []string
	for _, p := range v.Projected.Sources {
		for _, it := range p.ConfigMap.Items {
			out = append(out, p.ConfigMap.Name+":"+it.Key+"="+it.Path)
		}
		if p.ConfigMap.Optional == nil || !*p.ConfigMap.Optional {
			out = append(out, "not optional: "+p.ConfigMap.Name)
		}
	}
	return out
}

// TestBuildSkillSet: which skills are mounted where, per rule of
// docs/omnia-controllers.md ("Skills reach the pod").
func TestBuildSkillSet(t *testing.T) {
	base := ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive)
	withSrc := func(name string, mut func(*omniav1.SkillSource), skills ...string) *omniav1.SkillSource {
		s := skillSource(name, "sha256:"+name, skills...)
		mut(s)
		return s
	}
	broken := withSrc("faq", func(s *omniav1.SkillSource) { s.Status.Phase, s.Status.Skills = omniav1.SkillSourcePhaseError, nil })
	cases := []struct {
		name     string
		pack     omniav1.PromptPack
		sources  map[string]*omniav1.SkillSource
		nilSet   bool
		want     []string // items of the volume
		unusable []string // fragments, one per unusable entry, in order
		pending  []string
	}{
		{"a pack without skills: no skill set", base, nil, true, nil, nil, nil},
		{"every resolved skill is projected from its source's ConfigMap, by reference, at <group>/<name>/SKILL.md, optional",
			skilled(base, "faq/returns", "faq/refunds", "ops/triage"),
			sources(skillSource("faq", "sha256:f", "refunds", "returns", "unused"), skillSource("ops", "sha256:o", "triage")), false,
			[]string{"faq-cm:refunds.SKILL.md=faq/refunds/SKILL.md", "faq-cm:returns.SKILL.md=faq/returns/SKILL.md",
				"ops-cm:triage.SKILL.md=ops/triage/SKILL.md"}, nil, nil},
		{"a skill is grouped under its mountAs, not its source's name",
			func() omniav1.PromptPack {
				p := skilled(base, "faq/returns")
				p.Spec.Skills[0].MountAs = "support"
				return p
			}(), sources(skillSource("faq", "sha256:f", "returns")), false,
			[]string{"faq-cm:returns.SKILL.md=support/returns/SKILL.md"}, nil, nil},
		{"a SkillSource in Error: no skill at all is mounted (never a partial set), and the source is named",
			skilled(base, "faq/returns", "ops/triage"), sources(broken, skillSource("ops", "sha256:o", "triage")), false,
			nil, []string{`SkillSource "faq" has no synced content yet`}, nil},
		{"a SkillSource that does not exist is named", skilled(base, "faq/returns"), nil, false, nil, []string{`SkillSource "faq" not found`}, nil},
		{"an included skill the source lacks is named", skilled(base, "faq/returns"), sources(skillSource("faq", "sha256:f", "refunds")), false,
			nil, []string{`SkillSource "faq" has no skill "returns"`}, nil},
		{"one skill name from two sources is named", skilled(base, "faq/returns", "ops/returns"),
			sources(skillSource("faq", "sha256:f", "returns"), skillSource("ops", "sha256:o", "returns")), false,
			nil, []string{`skill "returns" is supplied by SkillSources faq, ops`}, nil},
		{"a pack whose skills allow tools pack.json lacks (SkillToolsResolved=False) mounts none and says so",
			func() omniav1.PromptPack {
				p := skilled(base, "faq/returns")
				p.Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionSkillToolsResolved, Status: metav1.ConditionFalse,
					Reason: omniav1.ReasonUnknownTool, Message: "skills allow tools pack.json does not declare: returns:refund"}}
				return p
			}(), sources(skillSource("faq", "sha256:f", "returns")), false, nil, []string{"PromptPack support-v1: skills allow tools"}, nil},
		{"a skill name that is not a directory name is left out, not mounted outside the skills root",
			skilled(base, "faq/.."), sources(skillSource("faq", "sha256:f", "..")), false, nil, []string{`name ".." is not a directory name`}, nil},
		{"a SkillSource not judged yet (no phase, Pending, or an older generation) is pending: the agent waits",
			skilled(base, "a/x", "b/x", "c/x", "d/x"),
			sources(withSrc("a", func(s *omniav1.SkillSource) { s.Status = omniav1.SkillSourceStatus{} }),
				withSrc("b", func(s *omniav1.SkillSource) { s.Status.Phase = omniav1.SkillSourcePhasePending }),
				withSrc("c", func(s *omniav1.SkillSource) { s.Generation = 2 }, "x"),
				withSrc("d", func(s *omniav1.SkillSource) {}, "x")), false, nil, nil, []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := BuildSkillSet(&tc.pack, tc.sources)
			if tc.nilSet {
				if ss != nil {
					t.Fatalf("got %+v, want no skill set", ss)
				}
				return
			}
			if ss == nil {
				t.Fatal("no skill set")
			}
			var got []string
			if ss.mounted() {
				got = items(ss.volume())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("items %v, want %v (unusable %q)", got, tc.want, ss.unusable)
			}
			if (ss.Digest != "") != ss.mounted() {
				t.Fatalf("digest %q with %d mounts", ss.Digest, len(ss.mounts))
			}
			if !slices.Equal(ss.pending, tc.pending) {
				t.Fatalf("pending %v, want %v", ss.pending, tc.pending)
			}
			if len(ss.unusable) != len(tc.unusable) {
				t.Fatalf("unusable %q, want %d entries like %q", ss.unusable, len(tc.unusable), tc.unusable)
			}
			for i, frag := range tc.unusable {
				if !strings.Contains(ss.unusable[i], frag) {
					t.Fatalf("unusable[%d] %q does not say %q", i, ss.unusable[i], frag)
				}
			}
		})
	}
}

// TestSkillSourcePendingWaits: while a SkillSource the pack names has not
// been judged, the agent is Pending with SkillsReady=False naming it, no
// error (its watch brings the pass), and nothing is built.
func TestSkillSourcePendingWaits(t *testing.T) {
	in := inputs(agentSpec(nil), []omniav1.PromptPack{skilled(ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive), "faq/returns")}, readyProvider(nil))
	pending := skillSource("faq", "")
	pending.Status = omniav1.SkillSourceStatus{}
	in.SkillSources = sources(pending)
	var conds []metav1.Condition
	res := Resolve(in, &conds, t0)
	c := meta.FindStatusCondition(conds, omniav1.ConditionSkillsReady)
	if res.Usable || res.Phase != omniav1.AgentRuntimePhasePending || res.Retry != nil ||
		c == nil || c.Reason != omniav1.ReasonSkillSourcePending || !strings.Contains(c.Message, "faq") {
		t.Fatalf("usable %v phase %s retry %v SkillsReady %+v", res.Usable, res.Phase, res.Retry, c)
	}
}

// TestSkillSetDigest: the pods roll (the digest changes) when the set of
// mounted skills or a used source's content checksum changes, and on
// nothing else of a SkillSource's status.
func TestSkillSetDigest(t *testing.T) {
	pack := skilled(ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive), "faq/returns")
	digest := func(p omniav1.PromptPack, s *omniav1.SkillSource) string { return BuildSkillSet(&p, sources(s)).Digest }
	ref := digest(pack, skillSource("faq", "sha256:1", "returns"))
	for _, tc := range []struct {
		name  string
		pack  omniav1.PromptPack
		src   func() *omniav1.SkillSource
		equal bool
	}{
		{"the same inputs: the same digest", pack, func() *omniav1.SkillSource { return skillSource("faq", "sha256:1", "returns") }, true},
		{"status churn (conditions, a description, another skill's tools) changes nothing", pack, func() *omniav1.SkillSource {
			s := skillSource("faq", "sha256:1", "returns")
			s.Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SkillsSynced", LastTransitionTime: t0}}
			s.Status.Skills[0].Description = "reworded"
			s.Status.Skills[0].AllowedTools = []string{"x"}
			return s
		}, true},
		{"a new content checksum (a skill document edited in place) rolls", pack,
			func() *omniav1.SkillSource { return skillSource("faq", "sha256:2", "returns") }, false},
		{"another set of skills rolls", skilled(ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive), "faq/returns", "faq/refunds"),
			func() *omniav1.SkillSource { return skillSource("faq", "sha256:1", "refunds", "returns") }, false},
		{"another group rolls", func() omniav1.PromptPack {
			p := skilled(ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive), "faq/returns")
			p.Spec.Skills[0].MountAs = "support"
			return p
		}(), func() *omniav1.SkillSource { return skillSource("faq", "sha256:1", "returns") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := digest(tc.pack, tc.src()); (got == ref) != tc.equal {
				t.Fatalf("digest %s vs %s, want equal=%v", got, ref, tc.equal)
			}
		})
	}
}

// TestSkillsReachThePod: the runtime container mounts the skills
// read-only at /etc/omnia/skills with OMNIA_SKILLS_PATH, and the config
// hash follows their content; a pack without skills, or with none
// usable, has no skills volume and the hash it had before skills existed;
// SkillsReady says what was left out.
func TestSkillsReachThePod(t *testing.T) {
	plain := ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)
	withSkills := skilled(plain, "faq/returns")
	build := func(p omniav1.PromptPack, srcs map[string]*omniav1.SkillSource) (*appsv1.Deployment, []metav1.Condition) {
		in := inputs(agentSpec(nil), []omniav1.PromptPack{p}, readyProvider(nil))
		in.SkillSources = srcs
		var conds []metav1.Condition
		res := Resolve(in, &conds, t0)
		d, err := BuildDeployment(in, res, Config{FacadeImage: "facade:1"}, "runtime:1")
		if err != nil {
			t.Fatal(err)
		}
		return d, conds
	}
	hashOf := func(d *appsv1.Deployment) string { return d.Spec.Template.Annotations[omniav1.AnnotationConfigHash] }
	noSkills, _ := build(plain, nil)
	for _, tc := range []struct {
		name      string
		pack      omniav1.PromptPack
		srcs      map[string]*omniav1.SkillSource
		wantMount bool
		wantCond  metav1.ConditionStatus // "" for none
	}{
		{"a pack without skills: no volume, no SkillsReady", plain, nil, false, ""},
		{"a usable skill: volume, read-only mount, OMNIA_SKILLS_PATH, SkillsReady=True", withSkills,
			sources(skillSource("faq", "sha256:1", "returns")), true, metav1.ConditionTrue},
		{"a SkillSource that is not Ready: no broken mount, SkillsReady=False naming it", withSkills,
			sources(func() *omniav1.SkillSource {
				s := skillSource("faq", "sha256:1", "returns")
				s.Status.Phase = omniav1.SkillSourcePhaseError
				return s
			}()), false, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, conds := build(tc.pack, tc.srcs)
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			hasVol := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == SkillsVolumeName })
			mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == SkillsVolumeName && m.MountPath == SkillsMountPath && m.ReadOnly
			})
			pathEnv := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvSkillsPath && e.Value == SkillsMountPath })
			if hasVol != tc.wantMount || mounted != tc.wantMount || pathEnv != tc.wantMount {
				t.Fatalf("volume %v, mount %v, env %v; want %v", hasVol, mounted, pathEnv, tc.wantMount)
			}
			if (hashOf(d) != hashOf(noSkills)) != tc.wantMount {
				t.Fatalf("config hash %s vs %s without skills; want different=%v", hashOf(d), hashOf(noSkills), tc.wantMount)
			}
			cond := meta.FindStatusCondition(conds, omniav1.ConditionSkillsReady)
			switch {
			case tc.wantCond == "" && cond != nil:
				t.Fatalf("SkillsReady set: %+v", cond)
			case tc.wantCond != "" && (cond == nil || cond.Status != tc.wantCond):
				t.Fatalf("SkillsReady %+v, want %s", cond, tc.wantCond)
			case tc.wantCond == metav1.ConditionFalse && !strings.Contains(cond.Message, `SkillSource "faq"`):
				t.Fatalf("message %q does not name the SkillSource", cond.Message)
			}
		})
	}
}

// TestCandidateGetsItsOwnSkills: during a rollout the candidate
// Deployment mounts the skills of the pack version it runs, the stable
// one those of its own.
func TestCandidateGetsItsOwnSkills(t *testing.T) {
	s := readySnapshot(func(a *omniav1.AgentRuntime) {
		a.Spec.Rollout = roHeld(50, omniav1.TrafficRoutingReplicaWeighted)
	})
	srcs := sources(skillSource("faq", "sha256:1", "returns", "refunds"))
	packs := []omniav1.PromptPack{skilled(ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive), "faq/returns"),
		skilled(ppack("support-v2", "1.1.0", omniav1.PromptPackPhaseActive), "faq/refunds")}
	s.in.Packs, s.candidate.in.Packs = packs, packs
	s.in.SkillSources, s.candidate.in.SkillSources = srcs, srcs
	p := decide(s)
	got := map[string][]string{}
	for _, w := range p.writes {
		d, ok := w.obj.(*appsv1.Deployment)
		if !ok || w.op == opDelete {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == SkillsVolumeName {
				got[d.Name] = items(v)
			}
		}
	}
	if want := []string{"faq-cm:returns.SKILL.md=faq/returns/SKILL.md"}; !slices.Equal(got["agent"], want) {
		t.Fatalf("stable skills %v, want %v (writes %v)", got["agent"], want, writesOf(p))
	}
	if want := []string{"faq-cm:refunds.SKILL.md=faq/refunds/SKILL.md"}; !slices.Equal(got["agent"+CandidateSuffix], want) {
		t.Fatalf("candidate skills %v, want %v (writes %v)", got["agent"+CandidateSuffix], want, writesOf(p))
	}
}
