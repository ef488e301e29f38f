// Package node runs pods as local processes: it registers a Node with a
// Kubernetes API server, binds pending pods that fit it, runs their
// containers as processes on the host, reports their status and serves
// their logs on a kubelet-style HTTPS endpoint so that `pods/log` and
// `kubectl logs` work.
//
//	n, err := node.Start(ctx, node.Config{RESTConfig: cfg, Name: "localnode", StateDir: dir})
//	defer n.Stop()
//
// Each container process is launched through a small "shim": the running
// binary re-executed (/proc/self/exe) with an environment marker. The shim
// creates a private mount namespace, bind-mounts the pod's volumes at their
// container paths, starts the command in a process group of its own,
// reaps it and records its exit code in the state directory, so a
// restarted node can adopt processes it left. The shim runs from this
// package's init function, so any binary that imports this package — the
// localnode command, kubestack, or a `go test` binary — serves as its own
// shim with no extra wiring. Container processes need root (mount
// namespaces); runAsUser and runAsGroup are applied after the mounts.
//
// A container runs in one of two modes:
//
//   - Image mode, when Config.ImageDirs holds its image (a `docker save`
//     tarball or an OCI layout; nothing is pulled): the image is unpacked
//     once per digest, and the command runs chrooted into an overlay of it,
//     with /proc, a minimal /dev, the pod's /etc/hosts and /etc/resolv.conf
//     and its volumes mounted inside, as the image's user unless the
//     securityContext says otherwise, with Kubernetes' rules for
//     command/args over Entrypoint/Cmd and for env and workingDir.
//   - Host mode, for any other image: the host's root filesystem stands in
//     for the image, and only command+args are run. A mount point missing
//     on the host is created there before the bind mount. A container
//     without `command` terminates at once with exit code 127 and reason
//     NoCommand, and the restart policy applies.
//
// With Config.Network, pods without hostNetwork get network namespaces and
// addresses of their own on a bridge the host reaches, Service ClusterIPs
// (forwarded in user space) and cluster DNS (see podnet.go); without it
// every pod shares the host's network at 127.0.0.1. Projected
// ServiceAccount tokens are requested bound to the pod and refreshed
// before they expire; in-cluster clients reach the API server at its own
// address (see apiproxy.go).
//
// Image mode is not isolation: there are no user, PID or cgroup
// namespaces, so a root container can reach the host through /proc.
// Not modelled: resource limits (no cgroups, so no OOMKilled), startup
// probes, gRPC probes, exec/attach/port-forward, updates of
// Secret/ConfigMap volumes after start (token volumes excepted), image
// pulls and garbage collection of unpacked images, UDP Services, and log
// rotation.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config describes one local node.
type Config struct {
	// RESTConfig reaches the API server; the identity needs to manage nodes,
	// leases, pods, pods/binding, pods/status, secrets, configmaps and
	// serviceaccounts/token (system:masters in practice).
	RESTConfig *rest.Config
	// Name is the Node's name and its kubernetes.io/hostname label; default
	// "localnode".
	Name string
	// StateDir holds pod directories, volumes, logs and pid files. It must
	// survive a restart for processes to be adopted.
	StateDir string
	// KubeletPort is the HTTPS port of the log endpoint on Address; 0
	// picks a free port.
	KubeletPort int
	// Address is the Node's InternalIP, where the API server reaches the
	// log endpoint (pods/log); default 127.0.0.1. An API server in a
	// container needs an address of the host it can reach, such as its
	// Docker network's gateway. Pods keep sharing the host's network at
	// 127.0.0.1 whatever it is.
	Address string
	// Labels are added to the Node's well-known labels.
	Labels map[string]string
	// Taints are put on the Node when it registers, so pods that do not
	// tolerate them are never bound to it (pods naming it in nodeName
	// still run, as on a kubelet).
	Taints []corev1.Taint
	// MaxPods is the Node's pod capacity; default 110.
	MaxPods int
	// LeavePodsRunning makes Stop leave container processes running for a
	// later Start with the same StateDir to adopt, as a kubelet restart
	// does. By default Stop kills them (SIGTERM, then SIGKILL after at most
	// 5s), so a test using the node leaves nothing behind.
	LeavePodsRunning bool
	// LeaseRenewInterval is how often the node Lease is renewed; default 10s.
	LeaseRenewInterval time.Duration
	// RestartBackoff is the first delay before a container restart; it
	// doubles per restart up to five minutes. Default 1s (a kubelet uses 10s;
	// a local node favours quick feedback).
	RestartBackoff time.Duration
	// ImageDirs are the image store: directories holding `docker save`
	// tarballs (*.tar) and OCI image layouts (a directory with an
	// oci-layout file, or subdirectories that are). A container whose
	// image the store holds runs from it (image mode); any other keeps
	// running as a host process. Empty: every container runs on the host.
	ImageDirs []string
	// ImageCacheDir holds the images' unpacked root filesystems, one per
	// config digest; default <StateDir>/images. Several nodes may share
	// it.
	ImageCacheDir string
	// Network, when set, gives every pod without hostNetwork a network
	// namespace and address of its own, Service ClusterIPs and cluster DNS
	// (see podnet.go). Nil keeps every pod on the host network at
	// 127.0.0.1.
	Network *NetworkConfig
	// SimulateRuns, when set, runs no container at all: each pod bound
	// to the node goes Running at once and Succeeded after a run length
	// in the range (see simulate.go), with an empty log. For load tests
	// of what watches pods and Jobs, with thousands of pods at once.
	SimulateRuns *SimulatedRuns
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.RESTConfig == nil {
		return errors.New("localnode: RESTConfig is required")
	}
	if c.StateDir == "" {
		return errors.New("localnode: StateDir is required")
	}
	if c.Name == "" {
		c.Name = "localnode"
	}
	if c.Address == "" {
		c.Address = hostIP
	} else if net.ParseIP(c.Address) == nil {
		return fmt.Errorf("localnode: Address %q is not an IP address", c.Address)
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = 10 * time.Second
	}
	if c.RestartBackoff == 0 {
		c.RestartBackoff = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ImageCacheDir == "" {
		c.ImageCacheDir = filepath.Join(c.StateDir, "images")
	}
	return nil
}

// Node is a running local node. Stop it with Stop.
type Node struct {
	cfg    Config
	kube   kubernetes.Interface
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	boundFactory, unboundFactory, nodeFactory informers.SharedInformerFactory
	bound, unbound                            corelisters.PodLister
	nodes                                     corelisters.NodeLister
	bindQueue                                 workqueue.TypedRateLimitingInterface[string]

	apiHost, apiPort string
	logServer        *logServer

	// images is the image store (nil: none); overlay says whether
	// container roots are overlay mounts (else copies).
	images  *imageStore
	overlay bool
	// net, svc and dns exist with Config.Network.
	net *nodeNetwork
	svc *serviceNet
	dns *dnsServer

	// sim writes the statuses of simulated runs (Config.SimulateRuns).
	sim *simulator

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	stopped bool
}

// Start registers the Node, starts its lease, log server and informers, and
// returns once the pod caches have synced and processes left by an earlier
// run in StateDir are adopted or cleaned up.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	for _, d := range []string{podsRoot(cfg.StateDir), logsRoot(cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("localnode: create state dir %s: %w", d, err)
		}
	}
	kube, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("localnode: build clientset: %w", err)
	}
	n := &Node{cfg: cfg, kube: kube, log: cfg.Logger.With("node", cfg.Name), workers: map[types.UID]*podWorker{}}
	n.apiHost, n.apiPort = apiServerHostPort(cfg.RESTConfig.Host)
	// The node runs until Stop, past ctx, which bounds only the start-up;
	// its lifetime context keeps ctx's values but not its cancellation.
	nodeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.ctx, n.cancel = nodeCtx, cancel
	ok := false
	defer func() {
		if !ok {
			n.cancel()
			n.wg.Wait()
		}
	}()

	if len(cfg.ImageDirs) > 0 {
		n.images = newImageStore(cfg.ImageDirs, cfg.ImageCacheDir, n.log)
		n.overlay = overlaySupported(cfg.StateDir)
		if !n.overlay {
			n.log.Info("overlayfs is not available here: image-mode containers get a copy of their image's rootfs")
		}
	}
	if cfg.Network != nil {
		if n.net, err = startNetwork(cfg.Network, cfg.StateDir); err != nil {
			return nil, err
		}
		defer func() {
			if !ok {
				// Keep what exists: pods left for adoption may use it.
				n.stopNetwork(false)
			}
		}()
		n.log.Info("pod network", "subnet", n.net.prefix.String(), "gateway", n.net.gateway.String(), "host", n.net.hostAddr.String())
	}
	if n.logServer, err = startLogServer(n, cfg.KubeletPort); err != nil {
		return nil, err
	}
	if err := n.register(ctx); err != nil {
		_ = n.logServer.close(ctx)
		return nil, err
	}
	if n.net != nil {
		if n.svc, err = startServiceNet(ctx, n, n.net); err != nil {
			_ = n.logServer.close(ctx)
			return nil, err
		}
		if n.dns, err = startDNS(nodeCtx, n.svc, n.net); err != nil {
			_ = n.logServer.close(ctx)
			return nil, fmt.Errorf("localnode: cluster DNS: %w", err)
		}
	}
	n.wg.Add(1)
	go func() { defer n.wg.Done(); n.heartbeat(nodeCtx) }()

	n.bindQueue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	n.boundFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.Name).String()
	}))
	n.unboundFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	}))
	n.nodeFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.Name).String()
	}))
	nodeInf := n.nodeFactory.Core().V1().Nodes()
	n.nodes = nodeInf.Lister()
	// Labels and taints decide what fits: look at waiting pods again when
	// they change.
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { n.enqueueAllUnbound() },
	}); err != nil {
		return nil, fmt.Errorf("localnode: watch node: %w", err)
	}
	boundInf := n.boundFactory.Core().V1().Pods()
	unboundInf := n.unboundFactory.Core().V1().Pods()
	n.bound, n.unbound = boundInf.Lister(), unboundInf.Lister()
	// Pod workers live as long as the node (n.ctx), past ctx, which bounds
	// only the start-up.
	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(obj) },    //nolint:contextcheck // workers run under the node's lifetime n.ctx, not Start's ctx
		UpdateFunc: func(_, obj any) { n.podChanged(obj) }, //nolint:contextcheck // workers run under the node's lifetime n.ctx, not Start's ctx
		DeleteFunc: n.podDeleted,
	}
	if cfg.SimulateRuns != nil {
		n.sim = newSimulator(n, *cfg.SimulateRuns)
		podHandler = n.sim.handler()
	}
	if _, err := boundInf.Informer().AddEventHandler(podHandler); err != nil {
		return nil, fmt.Errorf("localnode: watch bound pods: %w", err)
	}
	if _, err := unboundInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.enqueueBind,
		UpdateFunc: func(_, obj any) { n.enqueueBind(obj) },
	}); err != nil {
		return nil, fmt.Errorf("localnode: watch unbound pods: %w", err)
	}
	// Workers adopt what an earlier run left for their pod; the sweep after
	// the sync removes only what belongs to pods no longer in the API, so
	// the two never touch the same pod.
	n.boundFactory.Start(n.ctx.Done())
	n.unboundFactory.Start(n.ctx.Done())
	n.nodeFactory.Start(n.ctx.Done())
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), boundInf.Informer().HasSynced, unboundInf.Informer().HasSynced, nodeInf.Informer().HasSynced) {
		_ = n.logServer.close(ctx)
		return nil, errors.New("localnode: pod informers did not sync")
	}
	n.sweepOrphans()
	if n.sim != nil {
		n.sim.run(nodeCtx)
	}
	n.wg.Add(1)
	go func() { defer n.wg.Done(); n.runBinder(nodeCtx) }()
	ok = true
	n.log.Info("node started", "kubeletPort", n.logServer.port)
	return n, nil
}

// Name is the Node's name.
func (n *Node) Name() string { return n.cfg.Name }

// KubeletPort is the port the log endpoint listens on.
func (n *Node) KubeletPort() int { return n.logServer.port }

// Stop stops watching and serving, and kills container processes unless
// Config.LeavePodsRunning is set. Stop does not
// delete the Node object: its Lease lapses and the node lifecycle controller
// marks it NotReady, as with a stopped kubelet.
func (n *Node) Stop() {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.stopped = true
	workers := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		workers = append(workers, w)
	}
	n.mu.Unlock()
	n.bindQueue.ShutDown()
	if n.sim != nil {
		n.sim.queue.ShutDown()
	}
	n.cancel()
	if !n.cfg.LeavePodsRunning {
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() { defer wg.Done(); w.killAll(5 * time.Second) }()
		}
		wg.Wait()
	}
	for _, w := range workers {
		w.detach()
	}
	_ = n.logServer.close(n.ctx)
	n.boundFactory.Shutdown()
	n.unboundFactory.Shutdown()
	n.nodeFactory.Shutdown()
	n.stopNetwork(!n.cfg.LeavePodsRunning)
	n.wg.Wait()
}

// stopNetwork stops DNS and the Service forwarders; with destroy it also
// deletes every pod's network namespace and the switch, else it leaves
// them for a successor.
func (n *Node) stopNetwork(destroy bool) {
	if n.net == nil {
		return
	}
	if n.dns != nil {
		n.dns.stop()
	}
	if n.svc != nil {
		n.svc.stop()
	}
	if !destroy {
		_ = n.net.lock.Close()
		return
	}
	entries, _ := os.ReadDir(podsRoot(n.cfg.StateDir))
	for _, e := range entries {
		n.net.teardownPod(types.UID(e.Name()), filepath.Join(podsRoot(n.cfg.StateDir), e.Name()))
	}
	n.net.destroy()
}

// podChanged hands a bound pod to its worker, creating the worker on first
// sight.
func (n *Node) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	if w, ok := n.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	w := newPodWorker(n, pod)
	n.workers[pod.UID] = w
	n.wg.Add(1)
	go func() { defer n.wg.Done(); w.run() }()
}

// podDeleted stops what still runs for a pod removed from the API and
// removes its state.
func (n *Node) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	w := n.workers[pod.UID]
	delete(n.workers, pod.UID)
	stopped := n.stopped
	n.mu.Unlock()
	if stopped {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if w != nil {
			w.gone()
		}
		n.removePodState(pod.UID, pod.Namespace, pod.Name)
	}()
}

// apiServerHostPort splits the RESTConfig host into what in-cluster clients
// need as KUBERNETES_SERVICE_HOST and _PORT.
func apiServerHostPort(host string) (string, string) {
	u := host
	for _, p := range []string{"https://", "http://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			u = u[len(p):]
		}
	}
	if i := strings.IndexByte(u, '/'); i >= 0 {
		u = u[:i]
	}
	h, p, err := net.SplitHostPort(u)
	if err != nil {
		return u, "443"
	}
	return h, p
}

func podsRoot(state string) string { return filepath.Join(state, "pods") }
func logsRoot(state string) string { return filepath.Join(state, "logs") }
