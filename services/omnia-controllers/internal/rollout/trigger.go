package rollout

import (
	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Trigger decides whether spec.rollout.trigger starts a rollout: it
// returns the candidate promptPackRef to set, or nil. latest is the
// highest validated version on the trigger's channel ("" when none).
//
// Nothing starts while a rollout runs or is being promoted, before the
// agent has served any version (the first deploy is not a rollout), for a
// version that is not strictly newer than both the one served and the one
// the spec pins, or for one not strictly newer than the version last
// rolled back, so a failed candidate is not tried again until a fix is
// published.
func Trigger(a *omniav1.AgentRuntime, latest string) *omniav1.PromptPackRef {
	spec := &a.Spec
	if spec.Rollout == nil || spec.Rollout.Trigger == nil || Active(spec) || latest == "" {
		return nil
	}
	if r := a.Status.Rollout; r != nil && r.Promoting {
		return nil
	}
	if a.Status.ActiveVersion == nil || *a.Status.ActiveVersion == "" || !newer(latest, *a.Status.ActiveVersion) {
		return nil
	}
	// The spec's own pin counts as served too: right after an edit of it
	// the agent still reports the old version. A candidate equal to the
	// pin would be idle (not Active), so every pass would set it again
	// and end there, and the edited version would never be deployed; an
	// older one would roll the agent back from the version it was given.
	if v := spec.PromptPackRef.Version; v != nil && !newer(latest, *v) {
		return nil
	}
	if rb := a.Annotations[omniav1.AnnotationLastRolledBackVersion]; rb != "" && !newer(latest, rb) {
		return nil
	}
	return &omniav1.PromptPackRef{Name: spec.PromptPackRef.Name, Version: ptr(latest)}
}

// newer reports whether a has strictly higher precedence than b; an
// unparseable version is never newer.
func newer(a, b string) bool {
	c, err := omniav1.CompareVersions(a, b)
	return err == nil && c > 0
}
