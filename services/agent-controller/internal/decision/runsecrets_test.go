package decision

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// withIssuer is s on a controller that mints run credentials.
func withIssuer(s Snapshot) Snapshot {
	s.Config.Job.NATSURL = "nats://nats:4222"
	s.Config.Job.NATSCredentials = true
	return s
}

func TestRunSecretRules(t *testing.T) {
	timedOut := t0.Add(10 * time.Minute)
	cases := []planCase{
		{"a job run's credential Secret is asked for before its Job", func() Snapshot { return withIssuer(snap(agent("a", ""))) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || !p.RunCredentials || p.RunToken {
					t.Errorf("plan %+v", p)
				}
			}},
		{"a realtime run gets both its credential and its token", func() Snapshot { return withIssuer(realtimeSnap(agent("a", ""))) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || !p.RunCredentials || !p.RunToken {
					t.Errorf("plan %+v", p)
				}
			}},
		{"a batch fallback Job publishes too, so it gets a credential", func() Snapshot {
			s := withIssuer(batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFallback))
			s.Now = timedOut
			s.Batch = &BatchOutcome{State: BatchPending}
			return s
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || !p.RunCredentials {
				t.Errorf("plan %+v", p)
			}
		}},
		{"a batch submit has no pod and no credential", func() Snapshot { return withIssuer(batchSnap(agent("a", ""), "")) },
			func(t *testing.T, p Plan) {
				if p.Submit == nil || p.RunCredentials {
					t.Errorf("plan %+v", p)
				}
			}},
		{"without an issuer no credential is asked for", func() Snapshot { return snap(agent("a", "")) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || p.RunCredentials {
					t.Errorf("plan %+v", p)
				}
			}},
		{"without a NATS URL no credential is asked for", func() Snapshot {
			s := withIssuer(snap(agent("a", "")))
			s.Config.Job.NATSURL = ""
			return s
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || p.RunCredentials {
				t.Errorf("plan %+v", p)
			}
		}},
		{"a queued run writes no Secret", func() Snapshot {
			s := withIssuer(realtimeSnap(agent("a", "")))
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 1)
			s.StationRuns = []*agentsv1alpha1.Agent{running("other", t0.Add(-time.Hour))}
			return s
		}, func(t *testing.T, p Plan) {
			if p.CreateJob != nil || p.RunCredentials || p.RunToken {
				t.Errorf("plan %+v", p)
			}
		}},
		{"a run whose own Job exists (its patch to Running was lost) had its Secrets written before it", func() Snapshot {
			s := withIssuer(realtimeSnap(agent("a", "")))
			s.PendingWithJob = map[string]bool{"a": true}
			return s
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || p.RunCredentials || p.RunToken {
				t.Errorf("plan %+v", p)
			}
		}},
		{"a Running run's pass writes no Secret", func() Snapshot {
			s := withIssuer(snap(agent("a", agentsv1alpha1.PhaseRunning)))
			s.Job = job()
			return s
		}, func(t *testing.T, p Plan) {
			if p.RunCredentials || p.RunToken {
				t.Errorf("plan %+v", p)
			}
		}},
	}
	runPlanCases(t, cases)
}

func TestSecretNameTaken(t *testing.T) {
	const why = "is not controlled by this Agent (uid u-name) but by no controller"
	cases := []struct {
		rule  string
		agent *agentsv1alpha1.Agent
		check func(t *testing.T, p Plan)
	}{
		{"a Pending run fails before its Job, naming the Secret and who holds it", agent("a", ""), func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "Secret agentplane-nats-u-name already exists and is not controlled by this Agent (uid u-name) but by no controller")
			if p.CreateJob != nil || p.RunCredentials || p.Status.JobName != "" || p.Outcome.Failure != FailureInvalidSpec {
				t.Errorf("plan %+v", p)
			}
			if c := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionResolved); c == nil || c.Reason != ReasonSecretNameTaken {
				t.Errorf("Resolved condition %+v", c)
			}
		}},
		{"a started batch run falling back to a Job ends Failed", batchRunning("a"), func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "the run never mounts it")
			if p.CreateJob != nil || p.Outcome.Duration <= 0 {
				t.Errorf("plan %+v", p)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			c.check(t, SecretNameTaken(snap(c.agent), "agentplane-nats-"+string(c.agent.UID), why))
		})
	}
}
