package decision

import (
	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/vendors"
)

// A realtime session is a Job run (job.go's startJob and followJob) whose
// pod serves the session: it starts only on a controller running the
// realtime component and with a definition the session can honour, gets
// its token Secret before its Job, and, once the Job ended, records the
// vendor session it ended in so that a later Agent can resume it.

// Reasons a realtime session, or a resumeSession asked elsewhere, is
// refused with.
const (
	// ReasonRealtimeDisabled refuses a realtime run on a controller
	// running without the realtime component.
	ReasonRealtimeDisabled = "realtime execution is disabled on this controller"
	// ReasonResumeNeedsRealtime refuses spec.resumeSession on a job or
	// batch run: only a realtime session continues a vendor session.
	ReasonResumeNeedsRealtime = "resumeSession requires realtime execution"
	// ReasonResumeNeedsSource refuses spec.resumeSession when the
	// definition names no conversation store to restore it from.
	ReasonResumeNeedsSource = "resumeSession needs resources.conversation.source"
)

// decideRealtime is one pass over a realtime session.
func decideRealtime(s Snapshot) Plan {
	if s.Agent.Status.Phase == agentsv1alpha1.PhaseRunning {
		return followRealtime(s)
	}
	return startRealtime(s)
}

// startRealtime refuses a session that cannot run here, else starts it as
// a Job run with its token.
func startRealtime(s Snapshot) Plan {
	a, def := s.Agent, &s.Definition.Spec
	if !s.Config.RealtimeEnabled {
		return refuseDisabled(s, ReasonRealtimeDisabled)
	}
	if def.Resources != nil && def.Resources.Conversation != nil {
		// A session's conversation comes from its Agent (resumeSession);
		// the definition's fixed id and pin are not supported.
		if def.Resources.Conversation.ID != "" {
			return refuseInvalid(s, "realtime execution does not support resources.conversation.id; use the Agent's spec.resumeSession")
		}
		if def.Resources.Conversation.Pin != "" {
			return refuseInvalid(s, "realtime execution does not support resources.conversation.pin")
		}
	}
	if a.Spec.ResumeSession != "" {
		if def.Resources == nil || def.Resources.Conversation == nil || def.Resources.Conversation.Source == "" {
			return refuseInvalid(s, ReasonResumeNeedsSource)
		}
		if err := vendors.CheckResume(vendors.Route(a.EffectiveModel(s.Definition))); err != nil {
			return refuseInvalid(s, err.Error())
		}
	}
	if reason := preflight(s); reason != "" {
		return refuseInvalid(s, reason)
	}
	plan := startJob(s)
	// The Job mounts the token Secret, so it is written first.
	plan.RunToken = plan.CreateJob != nil
	if plan.RunToken && plan.Status != nil && plan.Status.Phase == agentsv1alpha1.PhaseRunning {
		plan.Events = append(plan.Events, newEvent(corev1.EventTypeNormal, EventSessionStarted, actionStart,
			"realtime session in Job "+plan.CreateJob.Name+"; it takes prompts through realtime-gateway once its pod is ready"))
	}
	return plan
}

// followRealtime follows the session's Job; once the Job ended and its
// pod's log was read, the terminal write also records status.sessionId.
func followRealtime(s Snapshot) Plan {
	plan := followJob(s)
	if s.Job != nil && s.Job.Finished && s.Pod.Found && s.Pod.LogErr == nil {
		if id := lastSessionID(s.Job, s.Pod.Log); id != "" {
			plan.Status.SessionID = id
		}
	}
	if plan.Outcome.Terminal != "" {
		note := "the realtime session ended"
		if id := plan.Status.SessionID; id != "" {
			note += "; its last vendor session is " + id
		}
		plan.Events = append([]Event{newEvent(corev1.EventTypeNormal, EventSessionEnded, actionFinish, note)}, plan.Events...)
	}
	return plan
}

// lastSessionID reads a session's last vendor session id from its log,
// with the parser of the vendor its frozen run spec names.
func lastSessionID(job *RunJob, log string) string {
	if !job.FrozenSpec {
		return ""
	}
	return vendors.LastSessionID(vendors.Route(job.Model), []byte(log))
}

// TokenRefused is the plan when a realtime run cannot get its token (the
// shared key is missing or unusable): it fails with the reason rather than
// waiting, so the misconfiguration is visible on the Agent.
func TokenRefused(s Snapshot, reason string) Plan {
	return refuseDisabled(s, reason)
}
