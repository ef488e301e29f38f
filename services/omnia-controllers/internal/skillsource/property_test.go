package skillsource

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random SkillSources and
// ConfigMaps: missing, without skill documents, with valid, invalid and
// duplicate documents under any key, and random stored statuses:
//
//   - no input makes it panic, and it leaves its input as it was;
//   - the same input gives the same decision;
//   - phase Ready goes with Ready=True and the parsed skills, sorted and
//     unique by name, with a checksum; phase Error with Ready=False, no
//     skills and no checksum; Retry is set exactly when the ConfigMap is
//     missing;
//   - its status, stored and decided on again later with the same
//     ConfigMap, needs no write.
func TestDecideProperties(t *testing.T) {
	decision.Run(t, genSnapshot, checkStatus).Require(t, 0.02, "phase Ready", "phase Error", "reason "+omniav1.ReasonSkillConfigMapNotFound, "reason "+omniav1.ReasonNoSkillDocuments,
		"reason "+omniav1.ReasonInvalidSkillDocument, "reason "+omniav1.ReasonDuplicateSkillName, "status write", "no status write")
}

// decision is Decide as the property tests drive it.
var decision = pt.Status[Snapshot, omniav1.SkillSourceStatus]{Fresh: fresh, Decide: Decide,
	At: func(s *Snapshot) (metav1.Object, *omniav1.SkillSourceStatus, *metav1.Time) {
		return s.Source, &s.Source.Status, &s.Now
	},
	Outcomes: func(st omniav1.SkillSourceStatus) []string {
		out := []string{"phase " + string(st.Phase)}
		if c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionReady); c != nil {
			out = append(out, "reason "+c.Reason)
		}
		return out
	}}

// fresh copies the SkillSource, the part of a snapshot Decide could write.
func fresh(s Snapshot) Snapshot {
	s.Source = s.Source.DeepCopy()
	return s
}

func checkStatus(s Snapshot, d Decision) error {
	st := d.Status
	c, err := pt.ReadyFor(st.Conditions, st.ObservedGeneration, s.Source.Generation)
	if err != nil {
		return err
	}
	switch st.Phase {
	case omniav1.SkillSourcePhaseReady:
		if c.Status != metav1.ConditionTrue || st.ContentChecksum == "" || len(st.Skills) == 0 {
			return fmt.Errorf("phase Ready with Ready %s, checksum %q, %d skills", c.Status, st.ContentChecksum, len(st.Skills))
		}
		names := make([]string, len(st.Skills))
		for i, sk := range st.Skills {
			names[i] = sk.Name
			if i > 0 && names[i-1] == sk.Name {
				return fmt.Errorf("skill %q listed twice", sk.Name)
			}
			if !IsSkillDocumentKey(sk.Key) {
				return fmt.Errorf("skill %q from key %q, not a skill document", sk.Name, sk.Key)
			}
		}
		if !sort.StringsAreSorted(names) {
			return fmt.Errorf("skills %v not sorted", names)
		}
	case omniav1.SkillSourcePhaseError:
		if c.Status != metav1.ConditionFalse || st.ContentChecksum != "" || len(st.Skills) > 0 {
			return fmt.Errorf("phase Error with Ready %s, checksum %q, %d skills", c.Status, st.ContentChecksum, len(st.Skills))
		}
	default:
		return fmt.Errorf("phase %q", st.Phase)
	}
	switch {
	case s.ConfigMap == nil && d.Retry == nil:
		return errors.New("ConfigMap missing, but no retry")
	case s.ConfigMap != nil && d.Retry != nil:
		return fmt.Errorf("retry with the ConfigMap present: %w", d.Retry)
	}
	return nil
}

// documents are skill documents, valid and not: frontmatter fields of
// every type, line endings, a byte order mark, unclosed blocks.
var documents = []string{
	"---\nname: refunds\ndescription: Handle refunds.\n---\n# Refunds\n",
	"---\nname: refunds\ndescription: Refunds, again.\nallowed-tools: [lookup_order]\n---\n",
	"---\r\nname: billing\r\ndescription: Billing questions.\r\nallowed-tools:\r\n  - lookup_order\r\n  - refund\r\n---\r\nbody\r\n",
	"\ufeff---\nname: shipping\ndescription: Track parcels.\nallowed-tools: []\nversion: 2\n---\n",
	"---\nname: triage\ndescription: \"  spaced  \"\n---",
	"---\nname: Bad_Name\ndescription: x\n---\n",
	"---\nname: nodesc\n---\n",
	"---\nname: tools\ndescription: x\nallowed-tools: lookup\n---\n",
	"---\nname: dup-tools\ndescription: x\nallowed-tools: [a, a]\n---\n",
	"---\nname: unclosed\ndescription: x\n",
	"no frontmatter at all",
	"---\n- a list\n---\n",
	"---\nname: [x]\ndescription: y\n---\n",
}

var keys = []string{"SKILL.md", "refunds.SKILL.md", "billing.SKILL.md", "x.SKILL.md", "README.md", "notes.skill.md"}

func genSnapshot(r *rand.Rand) Snapshot {
	src := &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: "skills", Namespace: "ns", Generation: int64(1 + r.IntN(4))},
		Spec: omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: "skills-cm"}}}
	s := Snapshot{Source: src, Now: pt.MetaTime(r)}
	if pt.Chance(r, 0.85) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skills-cm", Namespace: "ns"}, Data: map[string]string{}}
		valid := pt.Chance(r, 0.5) // mostly the first five documents, so Ready is common
		for _, k := range keys {
			if pt.Chance(r, 0.4) {
				if valid {
					cm.Data[k] = documents[r.IntN(5)]
				} else {
					cm.Data[k] = pt.Pick(r, documents...)
				}
			}
		}
		s.ConfigMap = cm
	}
	decision.Prior(r, &s, func() omniav1.SkillSourceStatus {
		return omniav1.SkillSourceStatus{
			Phase:              pt.Pick(r, omniav1.SkillSourcePhasePending, omniav1.SkillSourcePhaseReady, omniav1.SkillSourcePhaseError, ""),
			ObservedGeneration: int64(r.IntN(4)),
			ContentChecksum:    pt.Pick(r, "", "sha256:old"),
			Skills:             []omniav1.SkillSourceSkill{{Name: "refunds", Key: "SKILL.md"}}[:r.IntN(2)],
			Conditions:         pt.Conditions(r, 0.7, omniav1.ConditionReady, "SomeOtherCondition"),
		}
	})
	return s
}
