package connection

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random Connections (anonymous, or
// with a credential under any key and injection) and Secrets (missing,
// with and without the key, empty values), with random stored statuses:
//
//   - no input makes it panic, it leaves its input as it was, and the
//     same input gives the same decision;
//   - Ready goes with Ready=True, Failed with Ready=False, both for the
//     Connection's generation; Retry is set exactly when a named Secret is
//     missing;
//   - the Secret's values appear in no status, event or error;
//   - an event goes with a status write, and the written status, decided
//     on again later, needs no write.
func TestDecideProperties(t *testing.T) {
	decision.Run(t, genSnapshot, checkDecision).Require(t, 0.03, "reason "+omniav1.ReasonNoCredential, "reason "+omniav1.ReasonCredentialResolved, "reason "+omniav1.ReasonSecretNotFound,
		"reason "+omniav1.ReasonSecretKeyMissing, "status write", "no status write")
}

// decision is Decide as the property tests drive it.
var decision = pt.Status[Snapshot, omniav1.ConnectionStatus]{Fresh: fresh, Decide: Decide,
	At: func(s *Snapshot) (metav1.Object, *omniav1.ConnectionStatus, *metav1.Time) {
		return s.Connection, &s.Connection.Status, &s.Now
	},
	Outcomes: func(st omniav1.ConnectionStatus) []string { return pt.ReadyReason(st.Conditions) }}

func fresh(s Snapshot) Snapshot {
	s.Connection = s.Connection.DeepCopy()
	s.Secret = s.Secret.DeepCopy()
	return s
}

func checkDecision(s Snapshot, d Decision) error {
	c, st := s.Connection, d.Status
	ready, err := pt.ReadyFor(st.Conditions, st.ObservedGeneration, c.Generation)
	if err != nil {
		return err
	}
	if (st.Phase == omniav1.ConnectionPhaseReady) != (ready.Status == metav1.ConditionTrue) || st.Phase == omniav1.ConnectionPhasePending {
		return fmt.Errorf("phase %s with Ready %s", st.Phase, ready.Status)
	}
	if missing := c.Spec.Credential != nil && s.Secret == nil; missing != (d.Retry != nil) {
		return fmt.Errorf("Secret missing %v, retry set %v", missing, d.Retry != nil)
	}
	if s.Secret != nil {
		out, err := json.Marshal(struct {
			S omniav1.ConnectionStatus
			E any
			R string
		}{st, d.Events, fmt.Sprint(d.Retry)})
		if err != nil {
			return err
		}
		for k, v := range s.Secret.Data {
			if len(v) > 0 && strings.Contains(string(out), string(v)) {
				return fmt.Errorf("the value of key %q is in the decision: %s", k, out)
			}
		}
	}
	return nil
}

func genSnapshot(r *rand.Rand) Snapshot {
	c := conn(int64(1+r.IntN(4)), nil)
	if pt.Chance(r, 0.8) {
		cr := cred(pt.MaybePtr(r, 0.5, pt.Pick(r, "token", "pat", "api-key")))
		if pt.Chance(r, 0.3) {
			cr.InjectAs, cr.EnvVar = omniav1.InjectEnv, "TOKEN"
		}
		cr.Header = pt.Pick(r, "", "Authorization", "X-Api-Key")
		c.Spec.Credential = cr
	}
	s := Snapshot{Connection: c, Now: pt.MetaTime(r)}
	if pt.Chance(r, 0.75) {
		data := map[string]string{}
		for _, k := range []string{"token", "pat", "api-key", "other"} {
			if pt.Chance(r, 0.4) {
				data[k] = pt.Pick(r, secretValue, "another-s3cret-42", "")
			}
		}
		s.Secret = secret(data)
	}
	decision.Prior(r, &s, func() omniav1.ConnectionStatus {
		return omniav1.ConnectionStatus{
			Phase:              pt.Pick(r, omniav1.ConnectionPhasePending, omniav1.ConnectionPhaseReady, omniav1.ConnectionPhaseFailed, ""),
			ObservedGeneration: int64(r.IntN(4)),
			Conditions:         pt.Conditions(r, 0.7, omniav1.ConditionReady, "SomeOtherCondition"),
		}
	})
	return s
}
