package promptpack

import (
	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Ranking says which channels a validated version serves among its
// siblings.
type Ranking struct {
	// Stable and Prerelease report whether the version wins that channel.
	Stable, Prerelease bool
	// Winner is the sibling that serves the version's own channel when the
	// version serves none (nil when it is Active).
	Winner *omniav1.PromptPack
	// Duplicate is set when Winner has equal precedence (it differs only in
	// build metadata or a leading "v") and won by being created later.
	Duplicate bool
}

// Active reports whether the version serves at least one channel.
func (r Ranking) Active() bool { return r.Stable || r.Prerelease }

// ServedChannels names the channels served, for condition messages.
func (r Ranking) ServedChannels() string {
	switch {
	case r.Stable && r.Prerelease:
		return "stable and prerelease channels"
	case r.Stable:
		return "stable channel"
	case r.Prerelease:
		return "prerelease channel"
	}
	return "no channel"
}

func (r Ranking) serves(c omniav1.PromptPackChannel) bool {
	return c == omniav1.ChannelStable && r.Stable || c == omniav1.ChannelPrerelease && r.Prerelease
}

type candidate struct {
	pack *omniav1.PromptPack
	ver  omniav1.Version
}

// Rank places self, which has just passed validation, among its siblings.
// Only siblings that have been validated (phase Active or Superseded)
// compete: a Pending or Failed newer version must not supersede a working
// older one. Live versions never compete. On each channel the highest
// precedence wins; among equal precedence the later-created object wins
// (then the greater name, so the order is total and every worker agrees).
func Rank(self *omniav1.PromptPack, selfVer omniav1.Version, siblings []omniav1.PromptPack) Ranking {
	cands := []candidate{{self, selfVer}}
	for i := range siblings {
		s := &siblings[i]
		if s.Name == self.Name {
			continue
		}
		if s.IsLive() || s.Spec.PackName != self.Spec.PackName || s.DeletionTimestamp != nil {
			continue
		}
		if s.Status.Phase != omniav1.PromptPackPhaseActive && s.Status.Phase != omniav1.PromptPackPhaseSuperseded {
			continue
		}
		v, err := s.ParsedVersion()
		if err != nil {
			continue
		}
		cands = append(cands, candidate{s, v})
	}
	var r Ranking
	for _, ch := range []omniav1.PromptPackChannel{omniav1.ChannelStable, omniav1.ChannelPrerelease} {
		if !selfVer.OnChannel(ch) {
			continue
		}
		w := channelWinner(cands, ch)
		if w.pack == self {
			if ch == omniav1.ChannelStable {
				r.Stable = true
			} else {
				r.Prerelease = true
			}
		}
	}
	if !r.Active() {
		w := channelWinner(cands, selfVer.Channel())
		r.Winner = w.pack
		r.Duplicate = w.ver.Equal(selfVer)
	}
	return r
}

func channelWinner(cands []candidate, ch omniav1.PromptPackChannel) candidate {
	var best candidate
	for _, c := range cands {
		if !c.ver.OnChannel(ch) {
			continue
		}
		if best.pack == nil || beats(c, best) {
			best = c
		}
	}
	return best
}

// beats orders candidates: precedence, then creation time, then name.
func beats(a, b candidate) bool {
	if c := a.ver.Compare(b.ver); c != 0 {
		return c > 0
	}
	at, bt := a.pack.CreationTimestamp, b.pack.CreationTimestamp
	if !at.Equal(&bt) {
		return bt.Before(&at)
	}
	return a.pack.Name > b.pack.Name
}

// ChannelMax returns the PromptPack that serves channel ch among packs,
// counting only validated, non-live versions; nil when none. The
// AgentRuntime controller resolves track references with it, so an agent
// and the PromptPack controller agree on which version serves.
func ChannelMax(packs []omniav1.PromptPack, ch omniav1.PromptPackChannel) *omniav1.PromptPack {
	var cands []candidate
	for i := range packs {
		p := &packs[i]
		if p.IsLive() || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase != omniav1.PromptPackPhaseActive && p.Status.Phase != omniav1.PromptPackPhaseSuperseded {
			continue
		}
		v, err := p.ParsedVersion()
		if err != nil {
			continue
		}
		cands = append(cands, candidate{p, v})
	}
	return channelWinner(cands, ch).pack
}

// Older reports whether a has lower or equal precedence than b, the
// siblings a phase change of b must re-enqueue. Unparseable versions count
// as older so they are never starved of a reconcile.
func Older(a, b *omniav1.PromptPack) bool {
	c, err := omniav1.CompareVersions(a.Spec.Version, b.Spec.Version)
	return err != nil || c <= 0
}
