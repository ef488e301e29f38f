package promptpack

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// toolPack is validPack declaring the tools lookup_order and issue_refund.
const toolPack = `{"id":"support","name":"Support","version":"1.0.0",
 "template_engine":{"version":"v1","syntax":"{{variable}}"},
 "prompts":{"default":{"id":"default","name":"Default","version":"1.0.0","system_template":"You help."}},
 "tools":{"lookup_order":{"name":"lookup_order","description":"Look up an order"},
          "issue_refund":{"name":"issue_refund","description":"Refund an order"}}}`

func skill(name string, tools ...string) omniav1.SkillSourceSkill {
	return omniav1.SkillSourceSkill{Name: name, Description: name + " skill", AllowedTools: tools, Key: name + ".SKILL.md"}
}

// syncedSource is a SkillSource whose status describes its spec.
func syncedSource(name string, skills ...omniav1.SkillSourceSkill) *omniav1.SkillSource {
	return &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 3},
		Status: omniav1.SkillSourceStatus{Phase: omniav1.SkillSourcePhaseReady, ObservedGeneration: 3, Skills: skills}}
}

func sources(list ...*omniav1.SkillSource) map[string]*omniav1.SkillSource {
	m := map[string]*omniav1.SkillSource{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// TestSkillRules has one case per rule of the "resolve skills" step.
// Whatever the skills, the version stays Active: unresolved skills are
// reported in their conditions and never fail a validated version.
func TestSkillRules(t *testing.T) {
	v := mustValidator(t)
	billing := syncedSource("billing", skill("refunds", "lookup_order", "issue_refund"), skill("invoices", "lookup_order"))
	support := syncedSource("support", skill("triage"))
	stale := syncedSource("stale", skill("triage"))
	stale.Generation = 4 // spec changed, not synced again yet
	broken := syncedSource("broken")
	broken.Status.Phase = omniav1.SkillSourcePhaseError
	rogue := syncedSource("rogue", skill("refunds"), skill("escalate", "page_oncall", "delete_account"))

	type want struct {
		resolved, valid, tools [2]string // status, reason
	}
	allTrue := want{
		resolved: [2]string{"True", omniav1.ReasonAllSkillsResolved},
		valid:    [2]string{"True", omniav1.ReasonNoCollisions},
		tools:    [2]string{"True", omniav1.ReasonAllToolsResolved},
	}
	cases := []struct {
		name    string
		refs    []omniav1.SkillRef
		sources map[string]*omniav1.SkillSource
		content string
		want    want
		msg     string // a substring of some condition's message
		skills  []omniav1.ResolvedSkill
		retry   bool
	}{
		{
			name: "no skills: True NoSkills, nothing to collide or check",
			want: want{
				resolved: [2]string{"True", omniav1.ReasonNoSkills},
				valid:    [2]string{"True", omniav1.ReasonNoCollisions},
				tools:    [2]string{"True", omniav1.ReasonAllToolsResolved},
			},
		},
		{
			name:    "all resolved: every source synced, every tool declared; skills recorded sorted by name, grouped by mountAs or source name",
			refs:    []omniav1.SkillRef{{Source: "billing", MountAs: "money"}, {Source: "support"}},
			sources: sources(billing, support),
			want:    allTrue, msg: "3 skill(s) resolved from 2 SkillSource(s)",
			skills: []omniav1.ResolvedSkill{
				{Name: "invoices", Source: "billing", Group: "money", Key: "invoices.SKILL.md"},
				{Name: "refunds", Source: "billing", Group: "money", Key: "refunds.SKILL.md"},
				{Name: "triage", Source: "support", Group: "support", Key: "triage.SKILL.md"},
			},
		},
		{
			name:    "include filter: only the named skills are taken",
			refs:    []omniav1.SkillRef{{Source: "billing", Include: []string{"invoices"}}},
			sources: sources(billing),
			want:    allTrue,
			skills:  []omniav1.ResolvedSkill{{Name: "invoices", Source: "billing", Group: "billing", Key: "invoices.SKILL.md"}},
		},
		{
			name:    "SkillSource not found: LookupFailed naming it, retried with backoff",
			refs:    []omniav1.SkillRef{{Source: "billing"}, {Source: "ghost"}},
			sources: sources(billing),
			want:    want{resolved: [2]string{"False", omniav1.ReasonLookupFailed}, valid: allTrue.valid, tools: allTrue.tools},
			msg:     `SkillSource "ghost" not found`, retry: true,
		},
		{
			name:    "SkillSource not synced (Error phase, or status of an older generation): LookupFailed, no retry",
			refs:    []omniav1.SkillRef{{Source: "broken"}, {Source: "stale"}},
			sources: sources(broken, stale),
			want:    want{resolved: [2]string{"False", omniav1.ReasonLookupFailed}, valid: allTrue.valid, tools: allTrue.tools},
			msg:     `SkillSource "broken" has no synced content yet; SkillSource "stale" has no synced content yet`,
		},
		{
			name:    "unknown include: LookupFailed naming the skill",
			refs:    []omniav1.SkillRef{{Source: "billing", Include: []string{"refunds", "chargebacks"}}},
			sources: sources(billing),
			want:    want{resolved: [2]string{"False", omniav1.ReasonLookupFailed}, valid: allTrue.valid, tools: allTrue.tools},
			msg:     `SkillSource "billing" has no skill "chargebacks"`,
		},
		{
			name:    "name collision: one skill name from two sources",
			refs:    []omniav1.SkillRef{{Source: "billing", Include: []string{"refunds"}}, {Source: "rogue", Include: []string{"refunds"}}},
			sources: sources(billing, rogue),
			want:    want{resolved: allTrue.resolved, valid: [2]string{"False", omniav1.ReasonNameCollision}, tools: allTrue.tools},
			msg:     `skill "refunds" is supplied by SkillSources billing, rogue`,
		},
		{
			name:    "the same skill selected twice from one source is no collision",
			refs:    []omniav1.SkillRef{{Source: "billing", Include: []string{"refunds"}}, {Source: "billing", MountAs: "other"}},
			sources: sources(billing),
			want:    allTrue,
			skills: []omniav1.ResolvedSkill{
				{Name: "invoices", Source: "billing", Group: "other", Key: "invoices.SKILL.md"},
				{Name: "refunds", Source: "billing", Group: "billing", Key: "refunds.SKILL.md"},
			},
		},
		{
			name:    "unknown tool: skill:tool pairs listed sorted",
			refs:    []omniav1.SkillRef{{Source: "rogue", Include: []string{"escalate"}}, {Source: "billing"}},
			sources: sources(billing, rogue),
			content: validPack, // declares no tools at all
			want:    want{resolved: allTrue.resolved, valid: allTrue.valid, tools: [2]string{"False", omniav1.ReasonUnknownTool}},
			msg:     "escalate:delete_account, escalate:page_oncall, invoices:lookup_order, refunds:issue_refund, refunds:lookup_order",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pack("a", "1.0.0", 0, "")
			p.Spec.Skills = tc.refs
			content := tc.content
			if content == "" {
				content = toolPack
			}
			d := Decide(Snapshot{Pack: &p, ConfigMap: cm("a-cm", content), SkillSources: tc.sources, Now: t0}, v)
			wantCond(t, d.Status, omniav1.ConditionSkillsResolved, metav1.ConditionStatus(tc.want.resolved[0]), tc.want.resolved[1])
			wantCond(t, d.Status, omniav1.ConditionSkillsValid, metav1.ConditionStatus(tc.want.valid[0]), tc.want.valid[1])
			wantCond(t, d.Status, omniav1.ConditionSkillToolsResolved, metav1.ConditionStatus(tc.want.tools[0]), tc.want.tools[1])
			if tc.msg != "" && !anyMessage(d, tc.msg) {
				t.Errorf("no condition message contains %q: %+v", tc.msg, d.Status.Conditions)
			}
			if !reflect.DeepEqual(d.Status.Skills, tc.skills) {
				t.Errorf("status.skills = %+v, want %+v", d.Status.Skills, tc.skills)
			}
			if (d.Retry != nil) != tc.retry {
				t.Errorf("retry = %v, want %v", d.Retry, tc.retry)
			}
			if d.Status.Phase != omniav1.PromptPackPhaseActive {
				t.Errorf("skills must not change the phase: %s", d.Status.Phase)
			}
		})
	}
}

// TestSkillsOfLiveSource: a live pack's skills resolve, but their tools
// cannot be checked against content the controller never sees:
// SkillToolsResolved is Unknown, and the skills are still recorded, since
// the runtime checks the tools when it fetches the pack.
func TestSkillsOfLiveSource(t *testing.T) {
	p := pack("live", "1.0.0", 0, "")
	p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://authoring.local/pack.json"}}
	p.Spec.Skills = []omniav1.SkillRef{{Source: "s"}}
	d := Decide(Snapshot{Pack: &p, SkillSources: sources(syncedSource("s", skill("triage", "anything"))), Now: t0}, mustValidator(t))
	wantCond(t, d.Status, omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonAllSkillsResolved)
	wantCond(t, d.Status, omniav1.ConditionSkillToolsResolved, metav1.ConditionUnknown, omniav1.ReasonLiveSource)
	want := []omniav1.ResolvedSkill{{Name: "triage", Source: "s", Group: "s", Key: "triage.SKILL.md"}}
	if d.Status.Phase != omniav1.PromptPackPhaseActive || !reflect.DeepEqual(d.Status.Skills, want) {
		t.Fatalf("phase %s skills %+v", d.Status.Phase, d.Status.Skills)
	}
}

// TestSkillSourceWatch: a pack whose SkillSource does not exist reports
// LookupFailed, and creating a synced SkillSource moves it to
// AllSkillsResolved through the SkillSource watch alone: the wrapped
// reconciler drops the not-found error, so no backoff retry (and no
// timer) can bring the pass instead.
func TestSkillSourceWatch(t *testing.T) {
	ns := env.Namespace(t)
	v := mustValidator(t)
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Validator: v}
		return r.SetupWithManager(mgr, swallowErrors{r})
	})
	ctx := context.Background()
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-cm", Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: toolPack}}
	ctrltest.Create(t, env, c)
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: "support", Version: "1.0.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: "a-cm"}},
		Skills: []omniav1.SkillRef{{Source: "billing", Include: []string{"refunds"}, MountAs: "money"}}}}
	ctrltest.Create(t, env, p)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSkillsResolved, metav1.ConditionFalse, omniav1.ReasonLookupFailed))
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))

	// No SkillSource controller runs here: the test writes the status it
	// would write, which is the event the watch must carry.
	src := &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: "billing", Namespace: ns},
		Spec: omniav1.SkillSourceSpec{ConfigMapRef: omniav1.LocalObjectReference{Name: "skills"}}}
	ctrltest.Create(t, env, src)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSkillsResolved, metav1.ConditionFalse, omniav1.ReasonLookupFailed))
	src.Status = omniav1.SkillSourceStatus{Phase: omniav1.SkillSourcePhaseReady, ObservedGeneration: src.Generation,
		Skills: []omniav1.SkillSourceSkill{skill("refunds", "issue_refund"), skill("invoices")}}
	if err := env.Client.Status().Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonAllSkillsResolved))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSkillToolsResolved, metav1.ConditionTrue, omniav1.ReasonAllToolsResolved))
	got, err := getPack(ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []omniav1.ResolvedSkill{{Name: "refunds", Source: "billing", Group: "money", Key: "refunds.SKILL.md"}}
	if !reflect.DeepEqual(got.Status.Skills, want) {
		t.Fatalf("status.skills = %+v, want %+v", got.Status.Skills, want)
	}
}

// swallowErrors drops the reconciler's error, so controller-runtime does
// not retry and only watch events bring the next pass.
type swallowErrors struct{ inner reconcile.Reconciler }

func (s swallowErrors) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, _ := s.inner.Reconcile(ctx, req)
	return res, nil
}

// TestMissingSkillSourceIsRetried calls Reconcile directly: a SkillSource
// that does not exist is a missing reference, returned as an error so
// controller-runtime retries with backoff, as every missing reference
// is (docs/omnia-controllers.md); a failure to read it is returned too.
func TestMissingSkillSourceIsRetried(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache and indexes only
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-cm", Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: validPack}}
	ctrltest.Create(t, env, cfg)
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: "support", Version: "1.0.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: "a-cm"}},
		Skills: []omniav1.SkillRef{{Source: "ghost"}}}}
	ctrltest.Create(t, env, p)
	ctrltest.Eventually(t, wait, func() error {
		if _, err := getCached(c, ns, "a"); err != nil {
			return err
		}
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "a-cm"}, &corev1.ConfigMap{})
	})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "a"}}
	failing := &Reconciler{Client: &ctrltest.Failing{Client: c, Fail: map[string]bool{ctrltest.Call("get", &omniav1.SkillSource{}): true}}, Validator: mustValidator(t)}
	if _, err := failing.Reconcile(ctx, req); !ctrltest.IsInjected(err) {
		t.Fatalf("err %v, want the injected failure of reading the SkillSource", err)
	}
	r := &Reconciler{Client: c, Validator: mustValidator(t)}
	ctrltest.Eventually(t, wait, func() error {
		res, err := r.Reconcile(ctx, req)
		if err == nil || !strings.Contains(err.Error(), `SkillSource(s) ghost not found`) || res != (reconcile.Result{}) {
			t.Fatalf("result %+v err %v, want the missing SkillSource returned", res, err)
		}
		return condIs(ns, "a", omniav1.ConditionSkillsResolved, metav1.ConditionFalse, omniav1.ReasonLookupFailed)()
	})
}
