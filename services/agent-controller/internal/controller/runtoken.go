package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// ensureRunToken creates a realtime run's token Secret, owned by the Agent
// so it goes with it: the token is derived from the Agent's uid with the
// key the controller and realtime-gateway share, and reaches the pod only
// as a mounted file, never in the Job or Pod spec. It returns a reason when
// the run cannot get a token (the shared key is missing or unusable), and
// an error for a failure worth retrying.
func (c *Controller) ensureRunToken(ctx context.Context, a *agentsv1alpha1.Agent) (refused string, retry error) {
	ns := c.opts.RealtimeKeyNamespace
	key, err := c.kube.CoreV1().Secrets(ns).Get(ctx, realtime.KeySecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("realtime key Secret %s/%s not found", ns, realtime.KeySecretName), nil
	case err != nil:
		return "", fmt.Errorf("read the realtime key Secret: %w", err)
	}
	raw := key.Data[realtime.KeySecretKey]
	if err := realtime.CheckKey(raw); err != nil {
		return fmt.Sprintf("realtime key Secret %s/%s, key %q: %v", ns, realtime.KeySecretName, realtime.KeySecretKey, err), nil
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: realtime.TokenSecretName(string(a.UID)), Namespace: a.Namespace,
			Labels: map[string]string{agentsv1alpha1.LabelAgent: jobbuild.SafeName(a.Name)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{realtime.TokenSecretKey: []byte(realtime.Token(raw, string(a.UID)))},
	}
	_, err = c.kube.CoreV1().Secrets(a.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create the run's token Secret: %w", err)
	}
	return "", nil
}
