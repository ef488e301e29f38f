package stack

import (
	"context"
	"crypto/rand"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/realtime"
)

// CreateRealtimeKey creates the namespace ns and in it the random key
// Secret that agent-controller derives realtime run tokens from and
// realtime-gateway calls run pods with.
func CreateRealtimeKey(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: ns},
		Data:       map[string][]byte{realtime.KeySecretKey: key},
	}, metav1.CreateOptions{})
	return err
}
