package stack

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentplane/agentplane/tools/localnode/cli"
)

// TestMain lets the test binary stand in for kubestack's hidden
// `localnode` subcommand, which Up runs as a detached process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "localnode" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := cli.Run(ctx, os.Args[2:], os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "localnode: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "whoami-in-cluster" {
		os.Exit(whoamiInCluster())
	}
	os.Exit(m.Run())
}

// whoamiInCluster is what a test pod runs (the test binary as a host-mode
// container): it asks the API server who it is through client-go's
// in-cluster config, so the token, the CA and the API server's address
// inside the pod's network namespace all have to work.
func whoamiInCluster() int {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Println("in-cluster config:", err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Println("client:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println("self subject review:", err)
		return 1
	}
	fmt.Println(r.Status.UserInfo.Username)
	return 0
}
