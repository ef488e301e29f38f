package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// ensureRunToken creates a realtime run's token Secret, owned by the Agent
// so it goes with it: the token is derived from the Agent's uid with the
// key the controller and realtime-gateway share, and reaches the pod only
// as a mounted file, never in the Job or Pod spec. It returns the plan to
// decide instead when the run cannot get its token (the shared key is
// missing or unusable, or its Secret's name is taken), and an error for a
// failure worth retrying.
func (c *Controller) ensureRunToken(ctx context.Context, a *agentsv1alpha1.Agent) (replan func(decision.Snapshot) decision.Plan, retry error) {
	ns := c.opts.RealtimeKeyNamespace
	refused := func(reason string) func(decision.Snapshot) decision.Plan {
		return func(s decision.Snapshot) decision.Plan { return decision.TokenRefused(s, reason) }
	}
	key, err := c.kube.CoreV1().Secrets(ns).Get(ctx, realtime.KeySecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return refused(fmt.Sprintf("realtime key Secret %s/%s not found", ns, realtime.KeySecretName)), nil
	case err != nil:
		return nil, fmt.Errorf("read the realtime key Secret: %w", err)
	}
	raw := key.Data[realtime.KeySecretKey]
	if err := realtime.CheckKey(raw); err != nil {
		return refused(fmt.Sprintf("realtime key Secret %s/%s, key %q: %v", ns, realtime.KeySecretName, realtime.KeySecretKey, err)), nil
	}
	sec := runSecret(a, realtime.TokenSecretName(string(a.UID)),
		map[string][]byte{realtime.TokenSecretKey: []byte(realtime.Token(raw, string(a.UID)))})
	return c.createRunSecret(ctx, a, sec, func(existing *corev1.Secret) error {
		if !realtime.Verify(raw, string(a.UID), string(existing.Data[realtime.TokenSecretKey])) {
			return errors.New("its token is not the one the shared key gives this run")
		}
		return nil
	})
}

// runSecret is a Secret a run's pod mounts: in the Agent's namespace,
// controlled by the Agent so it goes with it, labelled with the Agent,
// and immutable, so what the controller wrote is what the pod reads.
func runSecret(a *agentsv1alpha1.Agent, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: a.Namespace,
			Labels: map[string]string{agentsv1alpha1.LabelAgent: jobbuild.SafeName(a.Name)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      data,
	}
}

// createRunSecret creates sec, a Secret of a's run (runSecret). Its name
// is derived from the Agent's uid, which whoever may read the Agent knows,
// so one that exists already is taken as the run's only when it is what
// an earlier pass wrote: controlled by a, immutable, and with content
// verify accepts (an owner reference is anyone's to write; the content
// is not). Any other is never mounted: the plan returned fails the run
// instead, naming the Secret but never its content.
func (c *Controller) createRunSecret(ctx context.Context, a *agentsv1alpha1.Agent, sec *corev1.Secret,
	verify func(*corev1.Secret) error) (replan func(decision.Snapshot) decision.Plan, retry error) {
	_, err := c.kube.CoreV1().Secrets(a.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	if err == nil {
		return nil, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create Secret %s: %w", sec.Name, err)
	}
	existing, err := c.kube.CoreV1().Secrets(a.Namespace).Get(ctx, sec.Name, metav1.GetOptions{})
	if err != nil {
		// Gone meanwhile, or unreadable for now: the next pass tries again.
		return nil, fmt.Errorf("read Secret %s, which already exists: %w", sec.Name, err)
	}
	why := ""
	switch {
	case !metav1.IsControlledBy(existing, a):
		owner := "no controller"
		if ref := metav1.GetControllerOf(existing); ref != nil {
			owner = fmt.Sprintf("controller %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
		}
		why = fmt.Sprintf("is not controlled by this Agent (uid %s) but by %s", a.UID, owner)
	case !ptr.Deref(existing.Immutable, false):
		why = "is controlled by this Agent but mutable, so not written by the controller"
	default:
		if err := verify(existing); err != nil {
			why = "is controlled by this Agent but was not written by the controller: " + err.Error()
		}
	}
	if why == "" {
		return nil, nil
	}
	c.log.Warn("a run's Secret name is taken; the run fails without it", "agent", a.Namespace+"/"+a.Name, "secret", sec.Name, "why", why)
	return func(s decision.Snapshot) decision.Plan { return decision.SecretNameTaken(s, sec.Name, why) }, nil
}
