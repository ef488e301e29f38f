package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/skillsource"
)

const returnsDoc = "---\nname: returns\ndescription: Handle a return.\n---\nAsk for the order number.\n"

// skillsVolume is the items of the agent Deployment's skills volume, nil
// when it has none.
func skillsVolume(ns, name string) ([]string, error) {
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, dep); err != nil {
		return nil, err
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == SkillsVolumeName {
			return items(v), nil
		}
	}
	return nil, nil
}

func skillSourceOf(t *testing.T, ns, name string) *omniav1.SkillSource {
	t.Helper()
	return ctrltest.Get[omniav1.SkillSource](t, env, types.NamespacedName{Namespace: ns, Name: name})
}

// TestSkillsReachThePodThroughWatches, against a real API server with the
// SkillSource, PromptPack and AgentRuntime controllers: the pack's
// resolved skill is projected into the agent's pods from the SkillSource's
// ConfigMap; a SkillSource status write that leaves its content alone
// rolls nothing; a skill document edited in place changes the source's
// checksum, which reaches the agent through its SkillSource watch (the
// pack's status.skills does not change) and rolls the pods exactly once; a
// source that is no longer Ready leaves the pods without the skill and
// SkillsReady=False names it.
func TestSkillsReachThePodThroughWatches(t *testing.T) {
	ns := env.Namespace(t)
	counter := startAll(t)
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&skillsource.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
	})
	ctx := context.Background()
	docs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "faq-docs", Namespace: ns}, Data: map[string]string{"returns.SKILL.md": returnsDoc}}
	src := &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: "faq", Namespace: ns},
		Spec: omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: "faq-docs"}}}
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	pack.Spec.Skills = []omniav1.SkillRef{{Source: "faq"}}
	ctrltest.Create(t, env, docs, src, cm, pack, mockProvider(ns, "llm"), newAgent(ns, "agent", nil))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}

	// 1. Mounted by reference, one ReplicaSet.
	ctrltest.Eventually(t, wait, func() error {
		got, err := skillsVolume(ns, "agent")
		if err != nil {
			return err
		}
		if want := []string{"faq-docs:returns.SKILL.md=faq/returns/SKILL.md"}; !slices.Equal(got, want) {
			return fmt.Errorf("skills volume %v, want %v", got, want)
		}
		a := mustAgent(t, ns, "agent")
		if !meta.IsStatusConditionTrue(a.Status.Conditions, omniav1.ConditionSkillsReady) {
			return fmt.Errorf("SkillsReady %+v", meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionSkillsReady))
		}
		return replicaSetsAre(t, ns, "agent", 1)()
	})
	counter.Drain(2 * time.Second)
	sum := skillSourceOf(t, ns, "faq").Status.ContentChecksum

	// 2. A status-only write that keeps the content: a pass, no rollout.
	before := counter.Count(key)
	s := skillSourceOf(t, ns, "faq")
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: omniav1.ReasonSkillsSynced, Message: "re-synced by hand"})
	if err := env.Client.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if counter.Count(key) == before {
			return errors.New("the status write has not reached the agent yet")
		}
		return nil
	})
	counter.Drain(2 * time.Second)
	ctrltest.Holds(t, replicaSetsAre(t, ns, "agent", 1)) // after a SkillSource status write

	// 3. The document edited in place: a new checksum, one new ReplicaSet.
	docs.Data["returns.SKILL.md"] = strings.Replace(returnsDoc, "order number", "order number and the reason", 1)
	if err := env.Client.Update(ctx, docs); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if s := skillSourceOf(t, ns, "faq"); s.Status.ContentChecksum == sum {
			return errors.New("the checksum has not changed yet")
		}
		return replicaSetsAre(t, ns, "agent", 2)()
	})
	counter.Drain(2 * time.Second)
	ctrltest.Holds(t, replicaSetsAre(t, ns, "agent", 2)) // after one document edit

	// 4. The source broken: no skill mounted, SkillsReady=False names it.
	docs.Data["returns.SKILL.md"] = "no frontmatter at all"
	if err := env.Client.Update(ctx, docs); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		a := mustAgent(t, ns, "agent")
		c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionSkillsReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonSkillsNotReady || !strings.Contains(c.Message, `SkillSource "faq"`) {
			return fmt.Errorf("SkillsReady %+v", c)
		}
		got, err := skillsVolume(ns, "agent")
		if err != nil {
			return err
		}
		if got != nil {
			return fmt.Errorf("the Deployment still mounts %v", got)
		}
		return nil
	})
}
