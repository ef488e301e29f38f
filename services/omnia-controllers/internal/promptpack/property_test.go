package promptpack

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// versionPool mixes equal precedence ("1.0.0", "v1.0.0", "1.0.0+b"),
// prereleases on both sides of releases, and one version admission
// refuses but a stored object may still carry.
var versionPool = []string{"0.9.0", "1.0.0", "v1.0.0", "1.0.0+b", "1.1.0-rc.1", "1.1.0", "2.0.0-beta", "2.0.0", "1.0"}

// TestDecideProperties checks Decide on random versions of one pack: any
// source (live, ConfigMap present or not, pack.json missing, not JSON,
// against the schema, valid with and without tools), any siblings in any
// phase, AgentRuntimes pinning or tracking it, skills resolved against
// SkillSources in any state, and random stored statuses:
//
//   - no input makes it panic, and it leaves its inputs as they were;
//   - the same input gives the same decision;
//   - an Active version names itself in activeVersion and is not
//     Superseded; a Superseded one has no activeVersion and says what
//     supersedes it; a Failed one has a False source or schema condition
//     and claims nothing (no activeVersion, skills, Superseded,
//     AgentsNotified or skill conditions); skills are listed only while no
//     skill condition is False;
//   - a pinned content digest is never replaced, one is pinned only by a
//     validation of the content read now, and ContentDrifted compares
//     that content with the pin (absent without a pin);
//   - Retry is set only for a missing ConfigMap or SkillSource, and
//     Changed is true exactly when the status differs (lastUpdated aside),
//     lastUpdated then being the pass's time;
//   - its status, stored and decided on again later with the same
//     siblings and objects, needs no write and emits no event.
func TestDecideProperties(t *testing.T) {
	v := mustValidator(t)
	decide := func(s Snapshot) Decision { return Decide(s, v) }
	pt.RunCounted(t, genSnapshot, fresh, decide, sameDecision, countOutcomes, func(r *rand.Rand, s Snapshot, d Decision) error {
		if err := checkStatus(s, d); err != nil {
			return err
		}
		stored, err := pt.Written(d.Status, s.Pack.Status, d.Changed)
		if err != nil {
			return err
		}
		s3 := fresh(s)
		s3.Pack.Status, s3.Now = stored, pt.Later(r, s.Now, time.Hour)
		if next := decide(s3); next.Changed || len(next.Events) > 0 || !equality.Semantic.DeepEqual(next.Status, stored) {
			return fmt.Errorf("the written status needs another write (events %v): %s", next.Events, pt.Diff(stored, next.Status))
		}
		return nil
	}).Require(t, 0.02, "phase Active", "phase Superseded", "phase Failed", "live", "skills listed", "retry", "events", "duplicate version", "no status write", "content drifted")
}

// countOutcomes counts what a decision reached, for Require.
func countOutcomes(c pt.Counts, s Snapshot, d Decision) {
	c.Add("phase " + string(d.Status.Phase))
	if s.Pack.IsLive() {
		c.Add("live")
	}
	if len(d.Status.Skills) > 0 {
		c.Add("skills listed")
	}
	if d.Retry != nil {
		c.Add("retry")
	}
	if len(d.Events) > 0 {
		c.Add("events")
	}
	if cond := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionSuperseded); cond != nil && cond.Reason == omniav1.ReasonDuplicateVersion {
		c.Add("duplicate version")
	}
	if !d.Changed {
		c.Add("no status write")
	}
	if meta.IsStatusConditionTrue(d.Status.Conditions, omniav1.ConditionContentDrifted) {
		c.Add("content drifted")
	}
}

// fresh copies the pack and its siblings, the parts of a snapshot Decide
// could write.
func fresh(s Snapshot) Snapshot {
	s.Pack = s.Pack.DeepCopy()
	s.Siblings = slices.Clone(s.Siblings)
	for i := range s.Siblings {
		s.Siblings[i] = *s.Siblings[i].DeepCopy()
	}
	return s
}

func sameDecision(a, b Decision) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status) && a.Changed == b.Changed &&
		equality.Semantic.DeepEqual(a.Events, b.Events) && (a.Retry == nil) == (b.Retry == nil) && (a.Retry == nil || a.Retry.Error() == b.Retry.Error())
}

func checkStatus(s Snapshot, d Decision) error {
	p, st := s.Pack, d.Status
	cond := func(typ string) *metav1.Condition { return meta.FindStatusCondition(st.Conditions, typ) }
	if st.ObservedGeneration != p.Generation {
		return fmt.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, p.Generation)
	}
	if ver, err := p.ParsedVersion(); err == nil && st.Channel != ver.Channel() {
		return fmt.Errorf("channel %s for version %s", st.Channel, p.Spec.Version)
	}
	skillConds := []string{omniav1.ConditionSkillsResolved, omniav1.ConditionSkillsValid, omniav1.ConditionSkillToolsResolved}
	switch st.Phase {
	case omniav1.PromptPackPhaseActive:
		if st.ActiveVersion == nil || *st.ActiveVersion != p.Spec.Version {
			return fmt.Errorf("Active with activeVersion %v", st.ActiveVersion)
		}
		if c := cond(omniav1.ConditionSuperseded); p.IsLive() && c != nil || !p.IsLive() && (c == nil || c.Status != metav1.ConditionFalse) {
			return fmt.Errorf("Active with Superseded %+v", c)
		}
	case omniav1.PromptPackPhaseSuperseded:
		if c := cond(omniav1.ConditionSuperseded); st.ActiveVersion != nil || c == nil || c.Status != metav1.ConditionTrue || p.IsLive() {
			return fmt.Errorf("Superseded with activeVersion %v, Superseded %+v", st.ActiveVersion, c)
		}
	case omniav1.PromptPackPhaseFailed:
		src, schema := cond(omniav1.ConditionSourceValid), cond(omniav1.ConditionSchemaValid)
		isFalse := func(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionFalse }
		if !isFalse(src) && !isFalse(schema) {
			return fmt.Errorf("Failed with SourceValid %+v and SchemaValid %+v", src, schema)
		}
		if st.ActiveVersion != nil || len(st.Skills) > 0 {
			return fmt.Errorf("Failed but claims activeVersion %v, %d skills", st.ActiveVersion, len(st.Skills))
		}
		for _, typ := range append([]string{omniav1.ConditionSuperseded, omniav1.ConditionAgentsNotified}, skillConds...) {
			if cond(typ) != nil {
				return fmt.Errorf("Failed but keeps condition %s", typ)
			}
		}
	default:
		return fmt.Errorf("phase %q", st.Phase)
	}
	if p.IsLive() && (st.Phase != omniav1.PromptPackPhaseActive || st.ContentDigest != "") {
		return fmt.Errorf("live version in phase %s with digest %q", st.Phase, st.ContentDigest)
	}
	if !p.IsLive() {
		if err := checkPin(s, st); err != nil {
			return err
		}
	}
	if len(st.Skills) > 0 {
		for _, typ := range skillConds {
			if c := cond(typ); c == nil || c.Status == metav1.ConditionFalse {
				return fmt.Errorf("skills listed with %s = %+v", typ, c)
			}
		}
	}
	if d.Retry != nil {
		missingCM := !p.IsLive() && p.Spec.Source.ConfigMapRef != nil && s.ConfigMap == nil
		missingSrc := false
		for _, ref := range p.Spec.Skills {
			if s.SkillSources[ref.Source] == nil {
				missingSrc = true
			}
		}
		if !missingCM && !missingSrc {
			return fmt.Errorf("retry with nothing missing: %w", d.Retry)
		}
	}
	if differs := !statusEqual(st, p.Status); d.Changed != differs {
		return fmt.Errorf("changed %v, but the status differs (lastUpdated aside): %v", d.Changed, differs)
	}
	if d.Changed && (st.LastUpdated == nil || !st.LastUpdated.Equal(&s.Now)) {
		return fmt.Errorf("a changed status has lastUpdated %v, want %v", st.LastUpdated, s.Now)
	}
	return nil
}

// checkPin checks content pinning for a ConfigMap source.
func checkPin(s Snapshot, st omniav1.PromptPackStatus) error {
	p := s.Pack
	stored := p.Status.ContentDigest
	now := "" // the digest of the pack.json read now; "" when unreadable
	if ref := p.Spec.Source.ConfigMapRef; ref != nil && s.ConfigMap != nil {
		if c, ok := s.ConfigMap.Data[omniav1.PackJSONKey]; ok {
			now = ContentDigest(c)
		}
	}
	validated := st.Phase == omniav1.PromptPackPhaseActive || st.Phase == omniav1.PromptPackPhaseSuperseded
	switch {
	case stored != "" && st.ContentDigest != stored:
		return fmt.Errorf("pinned digest %s replaced by %q", stored, st.ContentDigest)
	case stored == "" && st.ContentDigest != "" && (!validated || st.ContentDigest != now):
		return fmt.Errorf("digest %s pinned in phase %s; the content read now has %q", st.ContentDigest, st.Phase, now)
	case stored == "" && validated && st.ContentDigest != now:
		return fmt.Errorf("validated in phase %s without pinning %q", st.Phase, now)
	}
	if _, err := p.ParsedVersion(); err == nil { // an unparseable version fails before its content is read
		return checkDrift(st, now)
	}
	return nil
}

// checkDrift checks ContentDrifted against the pin and the digest of the
// content read now ("" when unreadable).
func checkDrift(st omniav1.PromptPackStatus, now string) error {
	c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionContentDrifted)
	var want metav1.ConditionStatus
	switch {
	case st.ContentDigest == "":
		if c != nil {
			return fmt.Errorf("ContentDrifted %+v without a pinned digest", c)
		}
		return nil
	case now == "":
		want = metav1.ConditionUnknown
	case now == st.ContentDigest:
		want = metav1.ConditionFalse
	default:
		want = metav1.ConditionTrue
	}
	if c == nil || c.Status != want {
		return fmt.Errorf("ContentDrifted %+v, want %s (pinned %s, now %q)", c, want, st.ContentDigest, now)
	}
	return nil
}

// genPack draws one version of pack "support".
func genPack(r *rand.Rand, name string) omniav1.PromptPack {
	p := omniav1.PromptPack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Generation: int64(1 + r.IntN(3)),
			CreationTimestamp: metav1.NewTime(pt.Epoch.Add(time.Duration(r.IntN(4)) * time.Minute))},
		Spec: omniav1.PromptPackSpec{PackName: "support", Version: pt.Pick(r, versionPool...)},
	}
	switch {
	case pt.Chance(r, 0.12):
		p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://authoring.local/pack.json"}}
	case pt.Chance(r, 0.03):
		p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap} // stored before the CEL rule
	default:
		p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name + "-cm"}}
	}
	return p
}

// genStatusFor draws a stored status for a version seen as a sibling or as
// the version itself: any phase, conditions in any state.
func genStatusFor(r *rand.Rand, p *omniav1.PromptPack) omniav1.PromptPackStatus {
	st := omniav1.PromptPackStatus{
		Phase:              pt.Pick(r, omniav1.PromptPackPhasePending, omniav1.PromptPackPhaseActive, omniav1.PromptPackPhaseActive, omniav1.PromptPackPhaseSuperseded, omniav1.PromptPackPhaseFailed, ""),
		ObservedGeneration: int64(r.IntN(3)),
		ContentDigest:      pt.Pick(r, "", "sha256:old", ContentDigest(validPack)),
		LastUpdated:        pt.MaybeTime(r, 0.5),
		Conditions: pt.Conditions(r, 0.4, omniav1.ConditionSourceValid, omniav1.ConditionSchemaValid, omniav1.ConditionSuperseded,
			omniav1.ConditionAgentsNotified, omniav1.ConditionSkillsResolved, omniav1.ConditionSkillsValid, omniav1.ConditionSkillToolsResolved,
			omniav1.ConditionContentDrifted),
	}
	if pt.Chance(r, 0.5) {
		st.ActiveVersion = pt.Ptr(p.Spec.Version)
	}
	return st
}

// genContent draws a ConfigMap's pack.json, or its absence.
func genContent(r *rand.Rand, name string) *corev1.ConfigMap {
	if pt.Chance(r, 0.08) {
		return nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-cm", Namespace: "ns"}, Data: map[string]string{}}
	switch r.IntN(10) {
	case 0:
		cm.Data["other.json"] = validPack
	case 1:
		cm.Data[omniav1.PackJSONKey] = `{"id": `
	case 2:
		cm.Data[omniav1.PackJSONKey] = `{"id":"support"}`
	case 3, 4, 5:
		cm.Data[omniav1.PackJSONKey] = validPack
	default:
		cm.Data[omniav1.PackJSONKey] = toolPack
	}
	return cm
}

// genSkillSource draws a SkillSource named name in any state.
func genSkillSource(r *rand.Rand, name string) *omniav1.SkillSource {
	if pt.Chance(r, 0.15) {
		return nil
	}
	src := &omniav1.SkillSource{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: int64(1 + r.IntN(2))}}
	src.Status.Phase = pt.Pick(r, omniav1.SkillSourcePhaseReady, omniav1.SkillSourcePhaseReady, omniav1.SkillSourcePhaseReady, omniav1.SkillSourcePhaseError, "")
	src.Status.ObservedGeneration = src.Generation
	if pt.Chance(r, 0.1) {
		src.Status.ObservedGeneration = 0 // not synced to its spec yet
	}
	for _, n := range []string{"refunds", "billing", "shipping"} {
		if pt.Chance(r, 0.6) {
			src.Status.Skills = append(src.Status.Skills, skill(n, pt.Pick(r, []string{}, []string{"lookup_order"}, []string{"issue_refund", "lookup_order"}, []string{"unknown_tool"})...))
		}
	}
	return src
}

// genSnapshot draws a version, its siblings, the agents that use the
// pack, the SkillSources its skills name and a stored status.
func genSnapshot(r *rand.Rand) Snapshot {
	names := []string{"pp-a", "pp-b", "pp-c", "pp-d", "pp-e"}
	self := genPack(r, names[0])
	s := Snapshot{Now: pt.MetaTime(r), ConfigMap: genContent(r, self.Name)}
	for range r.IntN(3) {
		ref := omniav1.SkillRef{Source: pt.Pick(r, "src-a", "src-b", "src-c"), MountAs: pt.Pick(r, "", "grp")}
		if pt.Chance(r, 0.4) {
			ref.Include = []string{pt.Pick(r, "refunds", "billing", "nope")}
		}
		self.Spec.Skills = append(self.Spec.Skills, ref)
	}
	for _, ref := range self.Spec.Skills {
		if s.SkillSources == nil {
			s.SkillSources = map[string]*omniav1.SkillSource{}
		}
		if _, seen := s.SkillSources[ref.Source]; !seen {
			s.SkillSources[ref.Source] = genSkillSource(r, ref.Source)
		}
	}
	for _, n := range names[1 : 1+r.IntN(4)] {
		sib := genPack(r, n)
		sib.Status = genStatusFor(r, &sib)
		if pt.Chance(r, 0.05) {
			sib.Spec.PackName = "other"
		}
		if pt.Chance(r, 0.05) {
			sib.DeletionTimestamp = pt.MaybeTime(r, 1)
			sib.Finalizers = []string{"x"}
		}
		s.Siblings = append(s.Siblings, sib)
	}
	for i := range r.IntN(4) {
		a := omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%d", i), Namespace: "ns"},
			Spec: omniav1.AgentRuntimeSpec{PromptPackRef: omniav1.PromptPackRef{Name: "support"}}}
		switch r.IntN(3) {
		case 0:
			a.Spec.PromptPackRef.Version = pt.Ptr(pt.Pick(r, versionPool[:8]...))
		case 1:
			a.Spec.PromptPackRef.Track = pt.Ptr(pt.Pick(r, omniav1.ChannelStable, omniav1.ChannelPrerelease))
		}
		s.Agents = append(s.Agents, a)
	}
	switch r.IntN(3) {
	case 0:
	case 1:
		self.Status = genStatusFor(r, &self)
	default:
		prev := s
		prev.Pack = self.DeepCopy()
		if pt.Chance(r, 0.5) && prev.Pack.Generation > 1 {
			prev.Pack.Generation--
		}
		self.Status = Decide(prev, sharedValidator).Status
	}
	if pt.Chance(r, 0.3) {
		s.Siblings = append(s.Siblings, self) // the list of versions includes the pack itself
	}
	s.Pack = pt.Cached(&self)
	return s
}

// sharedValidator is compiled once for the generators.
var sharedValidator = func() *SchemaValidator {
	v, err := NewSchemaValidator()
	if err != nil {
		panic(err)
	}
	return v
}()

// TestSiblingVersionsSettle runs the controller's passes over random sets of
// versions of one pack, in random order, each pass deciding one version
// against the others' stored statuses, as the single worker does when the
// sibling watch brings them back. The passes must stop writing within a
// few rounds, and then the highest validated version on each channel is
// Active and every other validated version Superseded: no two versions
// claim a channel, and no version waits for a pass that never comes.
func TestSiblingVersionsSettle(t *testing.T) {
	v := mustValidator(t)
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		n := 2 + r.IntN(4)
		packs := make([]omniav1.PromptPack, n)
		cms := make([]*corev1.ConfigMap, n)
		for i := range packs {
			packs[i] = genPack(r, fmt.Sprintf("pp-%d", i))
			if pt.Chance(r, 0.5) {
				packs[i].Status = genStatusFor(r, &packs[i])
			}
			cms[i] = genContent(r, packs[i].Name)
		}
		now := pt.Time(r)
		maxRounds := 2*n + 2
		for round := 0; ; round++ {
			if round == maxRounds {
				return fmt.Errorf("still writing after %d rounds over %d versions", maxRounds, n)
			}
			wrote := false
			for _, i := range r.Perm(n) {
				now = now.Add(time.Second)
				d := Decide(Snapshot{Pack: &packs[i], ConfigMap: cms[i], Siblings: packs, Now: metav1.NewTime(now)}, v)
				if d.Changed {
					st, err := pt.Stored(d.Status)
					if err != nil {
						return err
					}
					packs[i].Status = st
					wrote = true
				}
			}
			if !wrote {
				counts.Add(fmt.Sprintf("settled after %d round(s)", round))
				break
			}
		}
		for _, ch := range []omniav1.PromptPackChannel{omniav1.ChannelStable, omniav1.ChannelPrerelease} {
			winner := ChannelMax(packs, ch)
			if winner == nil {
				continue
			}
			if winner.Status.Phase != omniav1.PromptPackPhaseActive {
				return fmt.Errorf("%s (version %s) serves the %s channel but is %s", winner.Name, winner.Spec.Version, ch, winner.Status.Phase)
			}
			counts.Add("channel " + string(ch) + " served")
		}
		for i := range packs {
			p := &packs[i]
			if p.IsLive() || p.Status.Phase != omniav1.PromptPackPhaseActive {
				continue
			}
			ver, _ := p.ParsedVersion()
			serves := false
			for _, ch := range []omniav1.PromptPackChannel{omniav1.ChannelStable, omniav1.ChannelPrerelease} {
				if w := ChannelMax(packs, ch); ver.OnChannel(ch) && w != nil && w.Name == p.Name {
					serves = true
				}
			}
			if !serves {
				return fmt.Errorf("%s (version %s) is Active but serves no channel", p.Name, p.Spec.Version)
			}
		}
		return nil
	})
	counts.Require(t, 0.05, "channel stable served", "channel prerelease served")
}
