package promptpack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

const validPack = ctrltest.ValidPack

var t0 = metav1.NewTime(proptest.Epoch)

func mustValidator(t *testing.T) *SchemaValidator {
	t.Helper()
	v, err := NewSchemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// pack builds a ConfigMap-sourced version; created orders creation time.
func pack(name, version string, created int, phase omniav1.PromptPackPhase) omniav1.PromptPack {
	return omniav1.PromptPack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Generation: 1,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
		Spec: omniav1.PromptPackSpec{PackName: "support", Version: version, Source: omniav1.PromptPackSource{
			Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name + "-cm"}}},
		Status: omniav1.PromptPackStatus{Phase: phase},
	}
}

func cm(name, content string) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string]string{}}
	if content != "" {
		c.Data[omniav1.PackJSONKey] = content
	}
	return c
}

func agent(name string, version *string, track *omniav1.PromptPackChannel) omniav1.AgentRuntime {
	return omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: omniav1.AgentRuntimeSpec{PromptPackRef: omniav1.PromptPackRef{Name: "support", Version: version, Track: track}}}
}

func cond(t *testing.T, st omniav1.PromptPackStatus, typ string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(st.Conditions, typ)
}

func wantCond(t *testing.T, st omniav1.PromptPackStatus, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(t, st, typ)
	if c == nil {
		t.Fatalf("condition %s missing; have %+v", typ, st.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		t.Fatalf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
}

// TestDecide has one case per rule of the PromptPack decision: source,
// schema, digest, skills, ranking among versions.
func TestDecide(t *testing.T) {
	v := mustValidator(t)
	stable := omniav1.ChannelStable
	pin := func(s string) *string { return &s }
	live := pack("live", "1.0.0", 0, "")
	live.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://authoring.local/pack.json"}}

	cases := []struct {
		name      string
		snap      Snapshot
		phase     omniav1.PromptPackPhase
		conds     map[string][2]string // type -> status, reason
		event     string
		retry     bool
		active    bool
		digest    bool
		absent    []string
		msgSubstr string
	}{
		{
			name:  "live source: SourceValid from spec alone, Active",
			snap:  Snapshot{Pack: &live},
			phase: omniav1.PromptPackPhaseActive, active: true,
			conds: map[string][2]string{
				omniav1.ConditionSourceValid:    {"True", omniav1.ReasonLiveSource},
				omniav1.ConditionSchemaValid:    {"Unknown", omniav1.ReasonLiveSource},
				omniav1.ConditionAgentsNotified: {"True", omniav1.ReasonNoAgentsToNotify},
			},
			absent: []string{omniav1.ConditionSuperseded},
		},
		{
			name:  "missing ConfigMap: Failed, SourceValidationFailed event, schema Unknown, retried",
			snap:  Snapshot{Pack: ptr(pack("a", "1.0.0", 0, ""))},
			phase: omniav1.PromptPackPhaseFailed, retry: true, event: omniav1.EventSourceValidationFailed,
			conds: map[string][2]string{
				omniav1.ConditionSourceValid: {"False", omniav1.ReasonSourceValidationFailed},
				omniav1.ConditionSchemaValid: {"Unknown", omniav1.ReasonSourceInvalid},
			},
			absent: []string{omniav1.ConditionAgentsNotified, omniav1.ConditionSuperseded}, msgSubstr: `ConfigMap "a-cm" not found`,
		},
		{
			name:  "ConfigMap without pack.json: Failed, not retried (the ConfigMap watch brings it back)",
			snap:  Snapshot{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", "")},
			phase: omniav1.PromptPackPhaseFailed, event: omniav1.EventSourceValidationFailed,
			conds: map[string][2]string{
				omniav1.ConditionSourceValid: {"False", omniav1.ReasonSourceValidationFailed},
				omniav1.ConditionSchemaValid: {"Unknown", omniav1.ReasonSourceInvalid},
			},
			msgSubstr: `no "pack.json" key`,
		},
		{
			name:  "schema violation: Failed, SchemaValidationFailed event with the validator's message",
			snap:  Snapshot{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", `{"id":"Bad Id","name":"x"}`)},
			phase: omniav1.PromptPackPhaseFailed, event: omniav1.EventSchemaValidationFailed,
			conds: map[string][2]string{
				omniav1.ConditionSourceValid: {"True", omniav1.ReasonSourceValid},
				omniav1.ConditionSchemaValid: {"False", omniav1.ReasonSchemaValidationFailed},
			},
			msgSubstr: "/id: 'Bad Id' does not match pattern",
		},
		{
			name:  "valid, only version: Active with digest",
			snap:  Snapshot{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", validPack)},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
			conds: map[string][2]string{
				omniav1.ConditionSchemaValid:    {"True", omniav1.ReasonSchemaValid},
				omniav1.ConditionSuperseded:     {"False", omniav1.ReasonIsChannelMax},
				omniav1.ConditionSkillsResolved: {"True", omniav1.ReasonNoSkills},
			},
		},
		{
			name: "valid, a validated newer sibling: Superseded",
			snap: Snapshot{Pack: ptr(pack("a", "1.0.0", 0, omniav1.PromptPackPhaseActive)), ConfigMap: cm("a-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("b", "1.1.0", 5, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseSuperseded, digest: true,
			conds: map[string][2]string{omniav1.ConditionSuperseded: {"True", omniav1.ReasonNewerVersionPublished}},
		},
		{
			name: "an unvalidated (Pending or Failed) newer sibling cannot supersede",
			snap: Snapshot{Pack: ptr(pack("a", "1.0.0", 0, omniav1.PromptPackPhaseActive)), ConfigMap: cm("a-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("b", "2.0.0", 5, omniav1.PromptPackPhasePending), pack("c", "3.0.0", 6, omniav1.PromptPackPhaseFailed)}},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
		},
		{
			name: "equal precedence (build metadata): the earlier-created reports DuplicateVersion",
			snap: Snapshot{Pack: ptr(pack("a", "1.0.0+build.1", 0, omniav1.PromptPackPhaseActive)), ConfigMap: cm("a-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("b", "1.0.0+build.2", 5, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseSuperseded, digest: true, event: omniav1.EventDuplicateVersion,
			conds: map[string][2]string{omniav1.ConditionSuperseded: {"True", omniav1.ReasonDuplicateVersion}},
		},
		{
			name: "equal precedence: the later-created serves",
			snap: Snapshot{Pack: ptr(pack("b", "v1.0.0+build.2", 5, "")), ConfigMap: cm("b-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("a", "1.0.0+build.1", 0, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
		},
		{
			name: "stable max and a higher prerelease are both Active (the stable one)",
			snap: Snapshot{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("b", "1.1.0-rc.1", 5, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
		},
		{
			name: "stable max and a higher prerelease are both Active (the prerelease)",
			snap: Snapshot{Pack: ptr(pack("b", "1.1.0-rc.1", 5, "")), ConfigMap: cm("b-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("a", "1.0.0", 0, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
		},
		{
			name: "a prerelease below the stable max is Superseded",
			snap: Snapshot{Pack: ptr(pack("b", "1.0.0-rc.1", 5, "")), ConfigMap: cm("b-cm", validPack),
				Siblings: []omniav1.PromptPack{pack("a", "1.0.0", 0, omniav1.PromptPackPhaseActive)}},
			phase: omniav1.PromptPackPhaseSuperseded, digest: true,
			conds: map[string][2]string{omniav1.ConditionSuperseded: {"True", omniav1.ReasonNewerVersionPublished}},
		},
		{
			name: "AgentsNotified counts pins of this version and tracks of a channel it serves",
			snap: Snapshot{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", validPack),
				Agents: []omniav1.AgentRuntime{agent("pinned", pin("v1.0.0"), nil), agent("tracking", nil, &stable), agent("default", nil, nil), agent("other", pin("2.0.0"), nil)}},
			phase: omniav1.PromptPackPhaseActive, active: true, digest: true,
			conds:     map[string][2]string{omniav1.ConditionAgentsNotified: {"True", omniav1.ReasonAgentsNotified}},
			msgSubstr: "3 AgentRuntime(s)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = t0
			d := Decide(tc.snap, v)
			if d.Status.Phase != tc.phase {
				t.Fatalf("phase = %s, want %s (conditions %+v)", d.Status.Phase, tc.phase, d.Status.Conditions)
			}
			for typ, w := range tc.conds {
				wantCond(t, d.Status, typ, metav1.ConditionStatus(w[0]), w[1])
			}
			for _, typ := range tc.absent {
				if c := cond(t, d.Status, typ); c != nil {
					t.Errorf("condition %s present: %+v", typ, c)
				}
			}
			if (d.Retry != nil) != tc.retry {
				t.Errorf("retry = %v, want %v", d.Retry, tc.retry)
			}
			if (d.Status.ActiveVersion != nil) != tc.active {
				t.Errorf("activeVersion = %v, want set=%v", d.Status.ActiveVersion, tc.active)
			}
			if tc.active && *d.Status.ActiveVersion != tc.snap.Pack.Spec.Version {
				t.Errorf("activeVersion = %s", *d.Status.ActiveVersion)
			}
			if (d.Status.ContentDigest != "") != tc.digest || tc.digest && !strings.HasPrefix(d.Status.ContentDigest, "sha256:") {
				t.Errorf("contentDigest = %q, want set=%v", d.Status.ContentDigest, tc.digest)
			}
			switch {
			case tc.event == "" && len(d.Events) > 0:
				t.Errorf("unexpected events %+v", d.Events)
			case tc.event != "" && (len(d.Events) != 1 || d.Events[0].Reason != tc.event || d.Events[0].Type != corev1.EventTypeWarning):
				t.Errorf("events = %+v, want one Warning %s", d.Events, tc.event)
			}
			if tc.msgSubstr != "" && !anyMessage(d, tc.msgSubstr) {
				t.Errorf("no condition or event message contains %q: %+v %+v", tc.msgSubstr, d.Status.Conditions, d.Events)
			}
			if !d.Changed || d.Status.LastUpdated == nil {
				t.Errorf("first decision must change the status")
			}
		})
	}
}

func anyMessage(d Decision, sub string) bool {
	for _, c := range d.Status.Conditions {
		if strings.Contains(c.Message, sub) {
			return true
		}
	}
	for _, e := range d.Events {
		if strings.Contains(e.Message, sub) {
			return true
		}
	}
	return false
}

// TestDecideIdempotent: a second pass over its own result changes nothing
// and emits no event, so an idle pack is not written (a lastUpdated
// rewritten on every pass would bring the pack back forever).
func TestDecideIdempotent(t *testing.T) {
	v := mustValidator(t)
	for _, snap := range []Snapshot{
		{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", `{}`)},
		{Pack: ptr(pack("a", "1.0.0", 0, "")), ConfigMap: cm("a-cm", validPack)},
		{Pack: ptr(pack("a", "1.0.0+x", 0, "")), ConfigMap: cm("a-cm", validPack), Siblings: []omniav1.PromptPack{pack("b", "1.0.0+y", 3, omniav1.PromptPackPhaseActive)}},
		{Pack: withSkills(pack("a", "1.0.0", 0, ""), omniav1.SkillRef{Source: "s"}, omniav1.SkillRef{Source: "t"}), ConfigMap: cm("a-cm", toolPack),
			SkillSources: sources(syncedSource("s", skill("triage"), skill("refunds", "issue_refund")), syncedSource("t", skill("billing")))},
	} {
		snap.Now = t0
		first := Decide(snap, v)
		snap.Pack.Status = first.Status
		snap.Now = metav1.NewTime(t0.Add(time.Hour))
		second := Decide(snap, v)
		if second.Changed || len(second.Events) > 0 {
			t.Errorf("%s: second pass changed=%v events=%+v", snap.Pack.Spec.Version, second.Changed, second.Events)
		}
	}
}

func withSkills(p omniav1.PromptPack, refs ...omniav1.SkillRef) *omniav1.PromptPack {
	p.Spec.Skills = refs
	return &p
}

// TestDecideSourceFailureAfterSuccess: a version that served and then
// loses its ConfigMap clears activeVersion and keeps its pinned digest.
func TestDecideSourceFailureAfterSuccess(t *testing.T) {
	v := mustValidator(t)
	p := pack("a", "1.0.0", 0, "")
	ok := Decide(Snapshot{Pack: &p, ConfigMap: cm("a-cm", validPack), Now: t0}, v)
	p.Status = ok.Status
	bad := Decide(Snapshot{Pack: &p, Now: t0}, v)
	if bad.Status.Phase != omniav1.PromptPackPhaseFailed || bad.Status.ActiveVersion != nil || bad.Status.ContentDigest != ContentDigest(validPack) {
		t.Fatalf("status after source loss: %+v", bad.Status)
	}
	wantCond(t, bad.Status, omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid)
}

// TestDecideContentDrift has one case per rule of content pinning: the
// first validation pins pack.json's digest, and a later edit of the
// ConfigMap is reported (ContentDrifted, a Warning event) and never
// adopted as the new digest. Each case decides on the status the previous
// step stored, as the controller's passes do.
func TestDecideContentDrift(t *testing.T) {
	v := mustValidator(t)
	pinned, edited := ContentDigest(validPack), ContentDigest(toolPack)
	type step struct {
		content *corev1.ConfigMap
		phase   omniav1.PromptPackPhase
		digest  string
		// drift is the ContentDrifted condition's status and reason; ""
		// when the condition must be absent.
		drift, reason string
		// event is the Warning event the step must emit; "" for none.
		event string
		// names are substrings the condition's message must hold.
		names []string
	}
	cases := []struct {
		rule  string
		steps []step
	}{
		{"the first validation pins pack.json's digest, and matching content is no drift", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned,
				drift: "False", reason: omniav1.ReasonDigestMatches, names: []string{pinned}},
		}},
		{"an edit of an Active version's pack.json keeps the pinned digest and sets ContentDrifted naming both digests, with a Warning event", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
			{content: cm("a-cm", toolPack), phase: omniav1.PromptPackPhaseActive, digest: pinned,
				drift: "True", reason: omniav1.ReasonDigestMismatch, event: omniav1.EventContentDrifted, names: []string{pinned, edited, `"a-cm"`}},
		}},
		{"restoring the content clears the drift, without an event", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
			{content: cm("a-cm", toolPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "True", reason: omniav1.ReasonDigestMismatch, event: omniav1.EventContentDrifted},
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
		}},
		{"an edit the schema refuses fails the version and still reports the drift from the pinned digest", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
			{content: cm("a-cm", `{}`), phase: omniav1.PromptPackPhaseFailed, digest: pinned,
				drift: "True", reason: omniav1.ReasonDigestMismatch, event: omniav1.EventContentDrifted, names: []string{pinned, ContentDigest(`{}`)}},
		}},
		{"a later valid edit after a failing one is still drift: the failure did not unpin the digest", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
			{content: cm("a-cm", `{}`), phase: omniav1.PromptPackPhaseFailed, digest: pinned, drift: "True", reason: omniav1.ReasonDigestMismatch, event: omniav1.EventContentDrifted},
			{content: cm("a-cm", toolPack), phase: omniav1.PromptPackPhaseActive, digest: pinned,
				drift: "True", reason: omniav1.ReasonDigestMismatch, event: omniav1.EventContentDrifted, names: []string{edited}},
		}},
		{"pack.json that cannot be read leaves the drift Unknown and the digest pinned", []step{
			{content: cm("a-cm", validPack), phase: omniav1.PromptPackPhaseActive, digest: pinned, drift: "False", reason: omniav1.ReasonDigestMatches},
			{content: nil, phase: omniav1.PromptPackPhaseFailed, digest: pinned, drift: "Unknown", reason: omniav1.ReasonSourceInvalid, names: []string{pinned}},
		}},
		{"a version that never validated pins nothing and reports no drift", []step{
			{content: cm("a-cm", `{}`), phase: omniav1.PromptPackPhaseFailed, digest: ""},
			{content: cm("a-cm", toolPack), phase: omniav1.PromptPackPhaseActive, digest: edited, drift: "False", reason: omniav1.ReasonDigestMatches},
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			p := pack("a", "1.0.0", 0, "")
			for i, s := range c.steps {
				d := Decide(Snapshot{Pack: &p, ConfigMap: s.content, Now: t0}, v)
				st := d.Status
				if st.Phase != s.phase || st.ContentDigest != s.digest {
					t.Fatalf("step %d: phase %s digest %q, want %s %q", i, st.Phase, st.ContentDigest, s.phase, s.digest)
				}
				got := cond(t, st, omniav1.ConditionContentDrifted)
				switch {
				case s.drift == "" && got != nil:
					t.Fatalf("step %d: ContentDrifted %+v, want none", i, got)
				case s.drift != "":
					wantCond(t, st, omniav1.ConditionContentDrifted, metav1.ConditionStatus(s.drift), s.reason)
					for _, n := range s.names {
						if !strings.Contains(got.Message, n) {
							t.Errorf("step %d: message %q does not name %s", i, got.Message, n)
						}
					}
				}
				var events []string
				for _, e := range d.Events {
					if e.Reason == omniav1.EventContentDrifted {
						events = append(events, e.Type+" "+e.Reason)
					}
				}
				var want []string
				if s.event != "" {
					want = []string{corev1.EventTypeWarning + " " + s.event}
				}
				if strings.Join(events, ",") != strings.Join(want, ",") {
					t.Fatalf("step %d: drift events %v, want %v", i, events, want)
				}
				p.Status = st
			}
		})
	}
}

// TestSkillsDeclared: a declared skill is resolved, not reported as
// unavailable storage, and a failed version drops its skill conditions and
// skills ("resolve skills" comes after validation).
func TestSkillsDeclared(t *testing.T) {
	v := mustValidator(t)
	p := pack("a", "1.0.0", 0, "")
	p.Spec.Skills = []omniav1.SkillRef{{Source: "s"}}
	srcs := sources(syncedSource("s", skill("triage")))
	d := Decide(Snapshot{Pack: &p, ConfigMap: cm("a-cm", validPack), SkillSources: srcs, Now: t0}, v)
	wantCond(t, d.Status, omniav1.ConditionSkillsResolved, metav1.ConditionTrue, omniav1.ReasonAllSkillsResolved)
	if d.Status.Phase != omniav1.PromptPackPhaseActive || len(d.Status.Skills) != 1 {
		t.Fatalf("phase %s skills %+v", d.Status.Phase, d.Status.Skills)
	}

	p.Status = d.Status
	failed := Decide(Snapshot{Pack: &p, ConfigMap: cm("a-cm", `{}`), SkillSources: srcs, Now: t0}, v)
	if failed.Status.Phase != omniav1.PromptPackPhaseFailed || failed.Status.Skills != nil {
		t.Fatalf("failed version: phase %s skills %+v", failed.Status.Phase, failed.Status.Skills)
	}
	for _, typ := range []string{omniav1.ConditionSkillsResolved, omniav1.ConditionSkillsValid, omniav1.ConditionSkillToolsResolved} {
		if c := cond(t, failed.Status, typ); c != nil {
			t.Errorf("failed version keeps %s: %+v", typ, c)
		}
	}
}

func TestChannelMaxAndOlder(t *testing.T) {
	packs := []omniav1.PromptPack{
		pack("a", "1.0.0", 0, omniav1.PromptPackPhaseSuperseded),
		pack("b", "1.2.0", 1, omniav1.PromptPackPhaseActive),
		pack("c", "2.0.0-rc.1", 2, omniav1.PromptPackPhaseActive),
		pack("d", "3.0.0", 3, omniav1.PromptPackPhaseFailed),
		pack("e", "4.0.0", 4, omniav1.PromptPackPhasePending),
	}
	if got := ChannelMax(packs, omniav1.ChannelStable); got == nil || got.Name != "b" {
		t.Fatalf("stable max = %v", got)
	}
	if got := ChannelMax(packs, omniav1.ChannelPrerelease); got == nil || got.Name != "c" {
		t.Fatalf("prerelease max = %v", got)
	}
	if ChannelMax(packs[3:], omniav1.ChannelStable) != nil {
		t.Fatal("unvalidated versions must not serve")
	}
	if !Older(&packs[0], &packs[1]) || Older(&packs[1], &packs[0]) {
		t.Fatal("Older")
	}
}

// TestLiveURLCredentialsNeverShown: a live source's URL written with
// credentials in it (user:token@, ?token=) is named in the status without
// them.
func TestLiveURLCredentialsNeverShown(t *testing.T) {
	const secret = "live-s3cret"
	live := pack("live", "1.0.0", 0, "")
	live.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive,
		Live: &omniav1.LivePromptSource{URL: "https://bot:" + secret + "@authoring.local/pack.json?token=" + secret}}
	d := Decide(Snapshot{Pack: &live}, mustValidator(t))
	out := fmt.Sprintf("%+v %+v", d.Status, d.Events)
	if strings.Contains(out, secret) {
		t.Fatalf("the decision shows the credential: %s", out)
	}
	if !strings.Contains(out, "https://authoring.local/pack.json") {
		t.Fatalf("the decision does not name the source: %s", out)
	}
}
