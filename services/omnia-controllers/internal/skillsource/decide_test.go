package skillsource

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func source(gen int64) *omniav1.SkillSource {
	return &omniav1.SkillSource{
		ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: "ns", Generation: gen},
		Spec:       omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: "skills"}},
	}
}

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skills", Namespace: "ns"}, Data: data}
}

// TestDecide has one case per rule of the SkillSource controller.
func TestDecide(t *testing.T) {
	ready := source(2)
	ready.Status = omniav1.SkillSourceStatus{Phase: omniav1.SkillSourcePhaseReady, ObservedGeneration: 2, ContentChecksum: "sha256:old",
		Skills: []omniav1.SkillSourceSkill{{Name: "refunds", Key: "a.SKILL.md"}}}
	cases := []struct {
		name    string
		snap    Snapshot
		phase   omniav1.SkillSourcePhase
		reason  string
		msg     string
		skills  int
		retry   bool
		checked bool // contentChecksum set
	}{
		{name: "valid content: Ready with the skills listed",
			snap:  Snapshot{Source: source(1), ConfigMap: configMap(map[string]string{"a.SKILL.md": refundsDoc})},
			phase: omniav1.SkillSourcePhaseReady, reason: omniav1.ReasonSkillsSynced, msg: `1 skill(s) from ConfigMap "skills"`, skills: 1, checked: true},
		{name: "missing ConfigMap: Error naming it, retried with backoff",
			snap:  Snapshot{Source: source(1)},
			phase: omniav1.SkillSourcePhaseError, reason: omniav1.ReasonSkillConfigMapNotFound, msg: `ConfigMap "skills" not found in namespace "ns"`, retry: true},
		{name: "invalid document: Error with the parser's message, not retried",
			snap:  Snapshot{Source: source(1), ConfigMap: configMap(map[string]string{"a.SKILL.md": "---\nname: x\n"})},
			phase: omniav1.SkillSourcePhaseError, reason: omniav1.ReasonInvalidSkillDocument, msg: `ConfigMap "skills": key "a.SKILL.md": frontmatter is not closed by a "---" line`},
		{name: "no skill document: Error, not retried",
			snap:  Snapshot{Source: source(1), ConfigMap: configMap(map[string]string{"pack.json": "{}"})},
			phase: omniav1.SkillSourcePhaseError, reason: omniav1.ReasonNoSkillDocuments, msg: "no skill document"},
		{name: "content lost after Ready: skills and checksum are cleared",
			snap:  Snapshot{Source: ready, ConfigMap: configMap(map[string]string{"a.SKILL.md": "broken"})},
			phase: omniav1.SkillSourcePhaseError, reason: omniav1.ReasonInvalidSkillDocument, msg: "does not start with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = t0
			d := Decide(tc.snap)
			st := d.Status
			proptest.ReadyWant[omniav1.SkillSourcePhase]{Gen: tc.snap.Source.Generation, Phase: tc.phase, ReadyPhase: omniav1.SkillSourcePhaseReady,
				Reason: tc.reason, Msg: tc.msg}.Check(t, st.Phase, st.ObservedGeneration, st.Conditions)
			if len(st.Skills) != tc.skills || (st.ContentChecksum != "") != tc.checked {
				t.Fatalf("skills %+v checksum %q", st.Skills, st.ContentChecksum)
			}
			if (d.Retry != nil) != tc.retry {
				t.Fatalf("retry = %v, want %v", d.Retry, tc.retry)
			}
			if !d.Changed {
				t.Fatal("the first decision must change the status")
			}
		})
	}
}

// TestDecideIdempotent: a pass over its own result writes nothing, even
// later, so an idle SkillSource costs no API call.
func TestDecideIdempotent(t *testing.T) {
	for _, cm := range []*corev1.ConfigMap{nil, configMap(map[string]string{"a.SKILL.md": refundsDoc}), configMap(map[string]string{"a.SKILL.md": "x"})} {
		src := source(1)
		first := Decide(Snapshot{Source: src, ConfigMap: cm, Now: t0})
		src.Status = first.Status
		second := Decide(Snapshot{Source: src, ConfigMap: cm, Now: metav1.NewTime(t0.Add(time.Hour))})
		if second.Changed {
			t.Errorf("second pass changed the status: %+v", second.Status)
		}
	}
}
