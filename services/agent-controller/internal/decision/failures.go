package decision

import (
	"strings"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
)

// Starting a run can fail in two ways. A permanent failure would fail the
// same way on every retry (the cluster's policy denies the Job, the vendor
// does not know the model, the prompt is over the size limit): the run
// fails with that reason. A transient one may pass (an outage, a quota
// that frees up, a permission an administrator is adding): the controller
// retries with backoff and the Agent shows the last error meanwhile, so
// nothing waits silently.

// JobCreatePermanent reports whether a failed Job create will fail again
// however often it is retried.
func JobCreatePermanent(err error) bool {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return true
	case apierrors.IsForbidden(err):
		msg := err.Error()
		// A quota frees up and a missing permission can be granted; a
		// webhook's or policy's denial is the cluster's answer to this Job.
		return !strings.Contains(msg, "exceeded quota") && !strings.Contains(msg, "cannot create resource")
	}
	return false
}

// SubmitPermanent reports whether a batch submit batch-poller refused
// with code and msg will be refused again: the request is wrong (invalid,
// unknown model: the vendor's 404), the key is refused, or the prompt is
// over the gRPC message limit. Everything else (an outage, the vendor's
// rate limit) is worth a retry.
func SubmitPermanent(code codes.Code, msg string) bool {
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound:
		return true
	case codes.ResourceExhausted:
		// Also the vendor's 429; only the size limit is permanent.
		return strings.Contains(msg, "larger than max")
	}
	return false
}

// JobDenied is the plan when the cluster refused the run's Job for good.
func JobDenied(s Snapshot, err error) Plan {
	reason := agentsv1alpha1.ReasonDenied
	if apierrors.IsInvalid(err) {
		reason = agentsv1alpha1.ReasonInvalidDefinition
	}
	return fail(s, "the Job for this run was rejected: "+err.Error(), FailureInvalidSpec, reason)
}

// maxRetryMessage bounds the last error shown on the Agent.
const maxRetryMessage = 1024

// Retrying returns the status that shows a transient failure to start the
// run (what failed, and why) on its Started condition, or nil when the
// Agent already shows exactly that: a retry that fails the same way writes
// nothing, so the status write cannot itself re-trigger the reconcile
// ahead of the backoff.
func Retrying(s Snapshot, what string, err error) *agentsv1alpha1.AgentStatus {
	if s.Agent.Status.Phase != "" && s.Agent.Status.Phase != agentsv1alpha1.PhasePending {
		// A Running run (a batch falling back to a Job) keeps its Started
		// condition; the error is logged and retried.
		return nil
	}
	msg := truncate.String(strings.ToValidUTF8(what+" failed; retrying: "+err.Error(), ""), maxRetryMessage)
	if c := meta.FindStatusCondition(s.Agent.Status.Conditions, agentsv1alpha1.ConditionStarted); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == agentsv1alpha1.ReasonRetrying && c.Message == msg {
		return nil
	}
	st := s.Agent.Status.DeepCopy()
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionFalse, agentsv1alpha1.ReasonRetrying, msg)
	return st
}
