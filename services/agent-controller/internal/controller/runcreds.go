package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nats-io/jwt/v2"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// CredentialMargin is how long a run's NATS credential outlives the run's
// deadline: the time between the Secret and the Job's start, and clock
// skew between the controller and the NATS server.
const CredentialMargin = 15 * time.Minute

// DefaultCredentialTTL is the life of a run's credential when the
// controller is given none and the run has no deadline.
const DefaultCredentialTTL = 24 * time.Hour

// NATSCredentials is what the controller gives each run to publish its
// events with.
type NATSCredentials struct {
	// Issuer mints the runs' credentials.
	Issuer *natsauth.Issuer
	// TTL is the life of the credential of a run without a deadline;
	// DefaultCredentialTTL when zero.
	TTL time.Duration
	// CA, when set, goes into each run's Secret as runspec.NATSCAKey.
	CA []byte
}

// ensureRunCredentials creates the Secret runspec.NATSSecretName(uid)
// holding the run's own NATS credential (and the CA that verifies the
// server), before job, which mounts it: the credential may only publish
// the run's events and its namespace's sink subjects, and lives until the
// Job's deadline plus CredentialMargin. A Secret of that name the run
// does not own fails the run (createRunSecret).
func (c *Controller) ensureRunCredentials(ctx context.Context, a *agentsv1alpha1.Agent, job *batchv1.Job) (replan func(decision.Snapshot) decision.Plan, retry error) {
	nc := c.opts.NATS
	if nc == nil || nc.Issuer == nil {
		// The plan asks only when jobbuild mounts the Secret, which the
		// controller's config ties to an issuer.
		return nil, errors.New("the run's Job mounts a NATS credential but the controller has no issuer")
	}
	run := natsauth.Run{Namespace: a.Namespace, Agent: a.Name, UID: string(a.UID)}
	creds, err := nc.Issuer.RunCredentials(run, credentialExpiry(c.opts.Now(), job, nc.TTL))
	if err != nil {
		return nil, fmt.Errorf("mint the run's NATS credential: %w", err)
	}
	data := map[string][]byte{runspec.NATSCredsKey: creds}
	if len(nc.CA) > 0 {
		data[runspec.NATSCAKey] = nc.CA
	}
	sec := runSecret(a, runspec.NATSSecretName(string(a.UID)), data)
	return c.createRunSecret(ctx, a, sec, func(existing *corev1.Secret) error {
		if !bytes.Equal(existing.Data[runspec.NATSCAKey], data[runspec.NATSCAKey]) {
			return errors.New("its CA is not the controller's")
		}
		return sameRunCredential(existing.Data[runspec.NATSCredsKey], creds)
	})
}

// credentialExpiry is when a credential minted at now for job's run
// expires: the Job's deadline plus CredentialMargin, or ttl for a Job
// without one.
func credentialExpiry(now time.Time, job *batchv1.Job, ttl time.Duration) time.Time {
	if job != nil && job.Spec.ActiveDeadlineSeconds != nil && *job.Spec.ActiveDeadlineSeconds > 0 {
		return now.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second + CredentialMargin)
	}
	if ttl <= 0 {
		ttl = DefaultCredentialTTL
	}
	return now.Add(ttl)
}

// sameRunCredential checks that got is a credential the controller's
// issuer minted for the same run as want (a fresh one): signed by the
// same key for the same account, with the same name and permissions, and
// holding the seed of its own user. A credential of anyone else's making,
// or of another run, fails. The errors never quote the credential.
func sameRunCredential(got, want []byte) error {
	g, err := userClaims(got)
	if err != nil {
		return errors.New("its credential does not parse")
	}
	w, err := userClaims(want)
	if err != nil {
		return fmt.Errorf("the fresh credential does not parse: %w", err)
	}
	switch {
	case g.Issuer != w.Issuer || g.IssuerAccount != w.IssuerAccount:
		return errors.New("its credential is not signed by the platform's issuer")
	case g.Name != w.Name || !reflect.DeepEqual(g.Permissions, w.Permissions):
		return errors.New("its credential is not this run's")
	}
	kp, err := jwt.ParseDecoratedUserNKey(got)
	if err != nil {
		return errors.New("its credential holds no user seed")
	}
	if pub, err := kp.PublicKey(); err != nil || pub != g.Subject {
		return errors.New("its credential's seed is not its user's")
	}
	return nil
}

// userClaims decodes, and so verifies the signature of, a creds file's
// user JWT.
func userClaims(creds []byte) (*jwt.UserClaims, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, err
	}
	return jwt.DecodeUserClaims(token)
}
