package decision

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

var jobsGR = schema.GroupResource{Group: "batch", Resource: "jobs"}

func TestJobCreatePermanent(t *testing.T) {
	cases := []struct {
		rule string
		err  error
		want bool
	}{
		{"an invalid Job fails the run", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j", nil), true},
		{"a bad request fails the run", apierrors.NewBadRequest("bad"), true},
		{"a Job over the request size limit fails the run", apierrors.NewRequestEntityTooLargeError("too large"), true},
		{"an admission webhook's denial fails the run", apierrors.NewForbidden(jobsGR, "j", errors.New(`admission webhook "policy.example.com" denied the request: no`)), true},
		{"an exceeded quota is retried", apierrors.NewForbidden(jobsGR, "j", errors.New("exceeded quota: q, requested: count/jobs.batch=1")), false},
		{"a missing permission is retried", apierrors.NewForbidden(jobsGR, "j", errors.New(`User "x" cannot create resource "jobs"`)), false},
		{"an API server outage is retried", apierrors.NewServiceUnavailable("down"), false},
		{"a timeout is retried", apierrors.NewTimeoutError("slow", 1), false},
		{"throttling is retried", apierrors.NewTooManyRequests("slow down", 1), false},
		{"a network error is retried", errors.New("dial tcp: connection refused"), false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := JobCreatePermanent(c.err); got != c.want {
				t.Fatalf("JobCreatePermanent(%v) = %v", c.err, got)
			}
		})
	}
}

func TestSubmitPermanent(t *testing.T) {
	cases := []struct {
		rule string
		code codes.Code
		msg  string
		want bool
	}{
		{"an invalid request fails the run", codes.InvalidArgument, "bad", true},
		{"an unknown model (the vendor's 404) fails the run", codes.NotFound, "models/gemini-9 is not found", true},
		{"a refused key fails the run", codes.Unauthenticated, "bad key", true},
		{"a prompt over the message limit fails the run", codes.ResourceExhausted, "grpc: received message larger than max (5000000 vs. 4194304)", true},
		{"the vendor's rate limit is retried", codes.ResourceExhausted, "submit: status 429", false},
		{"an outage is retried", codes.Unavailable, "connection refused", false},
		{"a slow vendor is retried", codes.DeadlineExceeded, "deadline", false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := SubmitPermanent(c.code, c.msg); got != c.want {
				t.Fatalf("SubmitPermanent(%v, %q) = %v", c.code, c.msg, got)
			}
		})
	}
}

func TestRetryingShowsTheLastErrorOnce(t *testing.T) {
	s := Snapshot{Agent: &agentsv1alpha1.Agent{}}
	st := Retrying(s, "creating the Job", errors.New("exceeded quota"))
	if st == nil || len(st.Conditions) != 1 || st.Conditions[0].Reason != agentsv1alpha1.ReasonRetrying ||
		st.Conditions[0].Message != "creating the Job failed; retrying: exceeded quota" {
		t.Fatalf("status %+v", st)
	}
	s.Agent.Status = *st
	if again := Retrying(s, "creating the Job", errors.New("exceeded quota")); again != nil {
		t.Fatal("the same failure again must write nothing (its write would re-trigger the reconcile ahead of the backoff)")
	}
	if other := Retrying(s, "creating the Job", errors.New("connection refused")); other == nil {
		t.Fatal("a different failure is shown")
	}
	s.Agent.Status.Phase = agentsv1alpha1.PhaseRunning
	if Retrying(s, "creating the Job", errors.New("x")) != nil {
		t.Fatal("a Running run keeps its Started condition")
	}
}
