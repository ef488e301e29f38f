package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalNode describes the localnode process `up` starts, so pods bound to
// it run as local processes.
type LocalNode struct {
	// Command runs the localnode command line (package
	// tools/localnode/cli); kubestack re-executes itself with its hidden
	// `localnode` subcommand. Up appends the flags.
	Command []string
	// Name is the Node's name; default "localnode".
	Name string
	// Port is the kubelet endpoint port on the host address; default 10250.
	Port int
	// ImageStore are directories of image tarballs and OCI layouts: a
	// container whose image is there runs from it (localnode's image
	// mode). Empty: every container runs as a host process.
	ImageStore []string
	// ImageCache holds unpacked images; empty: under the state directory
	// (removed by down).
	ImageCache string
	// PodNetwork gives pods network namespaces, addresses, ClusterIPs and
	// cluster DNS of their own (localnode's --pod-network).
	PodNetwork bool
}

// startLocalNode starts localnode against the kubeconfig, records it with
// record, and waits until its Node is Ready.
func startLocalNode(ctx context.Context, cfg Config, kubeconfig string, cl *clients, record func(*process) error) (*process, error) {
	ln := cfg.LocalNode
	fmt.Fprintf(cfg.Log, "kubestack: starting localnode %s (kubelet endpoint %s:%d)\n", ln.Name, cfg.Host, ln.Port)
	args := append(append([]string{}, ln.Command[1:]...),
		"--kubeconfig="+kubeconfig, "--name="+ln.Name, "--state-dir="+filepath.Join(cfg.Dir, "localnode"),
		"--kubelet-port="+strconv.Itoa(ln.Port),
		// down removes the state dir: no container process may outlive it.
		"--stop-pods-on-exit")
	if len(ln.ImageStore) > 0 {
		args = append(args, "--image-store="+strings.Join(ln.ImageStore, ":"))
	}
	if ln.ImageCache != "" {
		args = append(args, "--image-cache="+ln.ImageCache)
	}
	if ln.PodNetwork {
		args = append(args, "--pod-network")
	}
	node, err := start("localnode", ln.Command[0], filepath.Join(cfg.Dir, "logs", "localnode.log"), args)
	if err != nil {
		return nil, err
	}
	if err := record(node); err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, cfg.Log, node, "the Node "+ln.Name+" to be Ready", cfg.ReadyTimeout, func(ctx context.Context) error {
		return nodeReady(ctx, cl, ln.Name, ln.Port)
	}); err != nil {
		return nil, err
	}
	return node, nil
}

// nodeReady checks that the Node reports Ready with the expected kubelet
// endpoint, i.e. that this localnode registered it.
func nodeReady(ctx context.Context, cl *clients, name string, port int) error {
	n, err := cl.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read node %s: %w", name, err)
	}
	if int(n.Status.DaemonEndpoints.KubeletEndpoint.Port) != port {
		return fmt.Errorf("node %s does not report kubelet port %d yet", name, port)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready", name)
}
