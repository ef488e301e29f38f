package skillsource

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

const triageDoc = "---\nname: triage\ndescription: Sort tickets.\nallowed-tools: [classify]\n---\nSort by urgency.\n"

// start runs the SkillSource controller.
func start(t *testing.T) {
	t.Helper()
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
	})
}

func newSource(ns, name, cm string) *omniav1.SkillSource {
	return &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: cm}}}
}

func newConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
}

// statusIs waits for phase, the Ready reason and, when skills is not nil,
// exactly those skill names in order.
func statusIs(ns, name string, phase omniav1.SkillSourcePhase, reason string, skills []string) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: name}, func(s *omniav1.SkillSource) error {
		if err := ctrltest.PhaseReason(s.Status.Phase, s.Status.Conditions, phase, omniav1.ConditionReady, reason); err != nil {
			return err
		}
		if skills != nil {
			var got []string
			for _, sk := range s.Status.Skills {
				got = append(got, sk.Name)
			}
			if strings.Join(got, ",") != strings.Join(skills, ",") {
				return fmt.Errorf("skills %v, want %v", got, skills)
			}
		}
		return nil
	})
}

func getSource(t *testing.T, ns, name string) *omniav1.SkillSource {
	t.Helper()
	return ctrltest.Get[omniav1.SkillSource](t, env, types.NamespacedName{Namespace: ns, Name: name})
}

// TestConfigMapEditsFlowToStatus: a SkillSource becomes Ready with its
// skills listed; edits of its ConfigMap reach the status through the
// ConfigMap watch (the SkillSource itself does not change, and a Ready
// source asks for no retry, so nothing else could bring the pass).
func TestConfigMapEditsFlowToStatus(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	cm := newConfigMap(ns, "skills", map[string]string{"refunds.SKILL.md": refundsDoc, "README.md": "ignored"})
	ctrltest.Create(t, env, cm, newSource(ns, "support", "skills"))
	ctrltest.Eventually(t, wait, statusIs(ns, "support", omniav1.SkillSourcePhaseReady, omniav1.ReasonSkillsSynced, []string{"refunds"}))
	got := getSource(t, ns, "support")
	want := omniav1.SkillSourceSkill{Name: "refunds", Description: "Handle refund requests within policy.",
		AllowedTools: []string{"lookup_order", "issue_refund"}, Key: "refunds.SKILL.md"}
	if !reflect.DeepEqual(got.Status.Skills[0], want) || got.Status.ObservedGeneration != got.Generation {
		t.Fatalf("status %+v", got.Status)
	}
	firstSum := got.Status.ContentChecksum

	cm.Data["triage.SKILL.md"] = triageDoc
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, statusIs(ns, "support", omniav1.SkillSourcePhaseReady, omniav1.ReasonSkillsSynced, []string{"refunds", "triage"}))
	if getSource(t, ns, "support").Status.ContentChecksum == firstSum {
		t.Error("the checksum did not follow the content")
	}

	cm.Data["triage.SKILL.md"] = "---\nname: Triage\n---\n"
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, statusIs(ns, "support", omniav1.SkillSourcePhaseError, omniav1.ReasonInvalidSkillDocument, []string{}))
	c := meta.FindStatusCondition(getSource(t, ns, "support").Status.Conditions, omniav1.ConditionReady)
	if !strings.Contains(c.Message, `key "triage.SKILL.md": name "Triage" must be lowercase`) {
		t.Errorf("Ready message %q does not carry the parser's words", c.Message)
	}
}

// TestMissingConfigMapThenCreated: a missing ConfigMap is an Error naming
// it; creating the ConfigMap makes the source Ready.
func TestMissingConfigMapThenCreated(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctrltest.Create(t, env, newSource(ns, "support", "later"))
	ctrltest.Eventually(t, wait, statusIs(ns, "support", omniav1.SkillSourcePhaseError, omniav1.ReasonSkillConfigMapNotFound, nil))
	c := meta.FindStatusCondition(getSource(t, ns, "support").Status.Conditions, omniav1.ConditionReady)
	if !strings.Contains(c.Message, `ConfigMap "later" not found`) {
		t.Errorf("Ready message %q", c.Message)
	}
	ctrltest.Create(t, env, newConfigMap(ns, "later", map[string]string{"SKILL.md": triageDoc}))
	ctrltest.Eventually(t, wait, statusIs(ns, "support", omniav1.SkillSourcePhaseReady, omniav1.ReasonSkillsSynced, []string{"triage"}))
}

// TestRequeueSplit calls Reconcile directly to check how failures split:
// a missing ConfigMap and a failing API call return an error (retried with
// backoff); an invalid document returns nil and waits for the ConfigMap
// watch; success asks for nothing.
func TestRequeueSplit(t *testing.T) {
	ns := env.Namespace(t)
	c := ctrltest.StartManager(t, env) // cache and indexes only, no controller
	ctrltest.Create(t, env,
		newSource(ns, "missing", "nowhere"),
		newConfigMap(ns, "bad", map[string]string{"a.SKILL.md": "no frontmatter"}), newSource(ns, "bad", "bad"),
		newConfigMap(ns, "good", map[string]string{"a.SKILL.md": triageDoc}), newSource(ns, "good", "good"))
	ctx := context.Background()
	cached := func(name string) error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &omniav1.SkillSource{})
	}
	for _, n := range []string{"missing", "bad", "good"} {
		ctrltest.Eventually(t, wait, func() error { return cached(n) })
	}
	ctrltest.Eventually(t, wait, func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "good"}, &corev1.ConfigMap{})
	})
	cases := []struct {
		name    string
		source  string
		fail    string
		wantErr bool
	}{
		{"missing ConfigMap: error", "missing", "", true},
		{"invalid document: no error", "bad", "", false},
		{"reading the ConfigMap fails: error", "good", ctrltest.Call("get", &corev1.ConfigMap{}), true},
		{"writing the status fails: error", "good", ctrltest.Call("status", &omniav1.SkillSource{}), true},
		{"nothing fails: success is not requeued", "good", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Client: &ctrltest.Failing{Client: c, Fail: map[string]bool{tc.fail: tc.fail != ""}}}
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: tc.source}})
			if (err != nil) != tc.wantErr || res != (reconcile.Result{}) {
				t.Fatalf("result %+v err %v, want error=%v and no timer", res, err, tc.wantErr)
			}
			if tc.fail != "" && !ctrltest.IsInjected(err) {
				t.Fatalf("err %v is not the injected failure", err)
			}
		})
	}
	ctrltest.Eventually(t, wait, statusIs(ns, "bad", omniav1.SkillSourcePhaseError, omniav1.ReasonInvalidSkillDocument, nil))
	ctrltest.Eventually(t, wait, statusIs(ns, "good", omniav1.SkillSourcePhaseReady, omniav1.ReasonSkillsSynced, []string{"triage"}))
}
