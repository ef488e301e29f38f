package stack

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/grpcauth"
)

// The suites run agent-controller as a process with a kubeconfig, not in
// a pod, so it has no projected token for batch-poller: it requests one
// for the ServiceAccount BatchCallerNamespace/BatchCallerName through the
// TokenRequest API, and batch-poller admits that ServiceAccount only, as
// an install admits agent-controller's (docs/batch-poller.md, "Callers").
const (
	BatchCallerNamespace = "default"
	BatchCallerName      = "agent-controller"
)

// BatchCaller creates the ServiceAccount agent-controller calls
// batch-poller as, and returns the flags each binary needs for it.
func BatchCaller(ctx context.Context, kube kubernetes.Interface) (pollerArgs, controllerArgs []string, err error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: BatchCallerNamespace, Name: BatchCallerName}}
	if _, err := kube.CoreV1().ServiceAccounts(BatchCallerNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, err
	}
	pollerArgs = []string{"--allowed-callers", grpcauth.ServiceAccountUsername(BatchCallerNamespace, BatchCallerName)}
	controllerArgs = []string{"--batch-poller-service-account", BatchCallerNamespace + "/" + BatchCallerName}
	return pollerArgs, controllerArgs, nil
}
