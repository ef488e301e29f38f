// Package stack starts and stops a local Kubernetes control plane — etcd,
// kube-apiserver and kube-controller-manager — on loopback, with generated
// certificates, a service-account key pair, an admin bearer token and a
// kubeconfig. The processes run detached; a state file records them so a
// later `down` stops them and removes their state.
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/tools/kubestack/controlplane"
)

// Files inside a state directory beside the PKI's.
const (
	stateFile      = "stack.json"
	kubeconfigFile = "kubeconfig"
)

// Config describes one local control plane.
type Config struct {
	// Dir holds all state: PKI, kubeconfig, etcd data, logs.
	Dir string
	// Assets holds the etcd, kube-apiserver and kube-controller-manager binaries.
	Assets string
	// CRDDir, when set, holds CRD YAML files installed once the API is up.
	CRDDir string
	// Host is the loopback address every component binds.
	Host string
	// APIServerPort, EtcdPort, EtcdPeerPort and ControllerManagerPort are the
	// listening ports.
	APIServerPort, EtcdPort, EtcdPeerPort, ControllerManagerPort int
	// ReadyTimeout bounds each wait for a component to become healthy.
	ReadyTimeout time.Duration
	// ExtraAPIServerArgs are appended to the apiserver's flags.
	ExtraAPIServerArgs []string
	// LocalNode, when set, also starts a localnode once the control plane
	// serves, so pods really run.
	LocalNode *LocalNode
	// Log receives progress lines.
	Log io.Writer
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.APIServerPort == 0 {
		c.APIServerPort = 6443
	}
	if c.EtcdPort == 0 {
		c.EtcdPort = 2379
	}
	if c.EtcdPeerPort == 0 {
		c.EtcdPeerPort = 2380
	}
	if c.ControllerManagerPort == 0 {
		c.ControllerManagerPort = 10257
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 90 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// State is what `up` records and `down` reads.
type State struct {
	Server     string     `json:"server"`
	Kubeconfig string     `json:"kubeconfig"`
	Processes  []*process `json:"processes"`
}

// Running is a started control plane.
type Running struct {
	State
	// Token is the admin bearer token (system:masters).
	Token string
	// CAFile is the CA that signed the apiserver's serving certificate.
	CAFile string
}

// Up starts the control plane and waits until it serves, CRDs are
// Established and the controller-manager has created the default
// ServiceAccount. On any failure it stops what it started.
func Up(ctx context.Context, cfg Config) (*Running, error) {
	cfg.Defaults()
	if st, err := ReadState(cfg.Dir); err == nil {
		for _, p := range st.Processes {
			if p.alive() {
				return nil, fmt.Errorf("a control plane is already running from %s (%s pid %d); run 'kubestack down' first", cfg.Dir, p.Name, p.PID)
			}
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(cfg.Assets, b)); err != nil {
			return nil, fmt.Errorf("binary %s missing in %s; run 'kubestack build'", b, cfg.Assets)
		}
	}
	ports := []struct {
		port int
		what string
	}{{cfg.APIServerPort, "kube-apiserver"}, {cfg.EtcdPort, "etcd clients"}, {cfg.EtcdPeerPort, "etcd peers"}, {cfg.ControllerManagerPort, "kube-controller-manager"}}
	if ln := cfg.LocalNode; ln != nil {
		if len(ln.Command) == 0 {
			return nil, errors.New("localnode requested without a command to run it")
		}
		if ln.Name == "" {
			ln.Name = "localnode"
		}
		if ln.Port == 0 {
			ln.Port = 10250
		}
		ports = append(ports, struct {
			port int
			what string
		}{ln.Port, "localnode's kubelet endpoint"})
	}
	for _, p := range ports {
		if err := checkPortFree(cfg.Host, p.port, p.what); err != nil {
			return nil, err
		}
	}

	if err := os.RemoveAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("clear state dir: %w", err)
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "logs"), filepath.Join(cfg.Dir, "etcd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	token, err := controlplane.WritePKI(cfg.Dir)
	if err != nil {
		return nil, err
	}
	server := "https://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.APIServerPort))
	kc := filepath.Join(cfg.Dir, kubeconfigFile)
	caFile := filepath.Join(cfg.Dir, controlplane.CACertFile)
	if err := os.WriteFile(kc, []byte(controlplane.Kubeconfig(server, caFile, token)), 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}

	r := &Running{State: State{Server: server, Kubeconfig: kc}, Token: token, CAFile: caFile}
	ok := false
	defer func() {
		if !ok {
			stopAll(r.Processes)
		}
	}()
	save := func() error { return writeState(cfg.Dir, &r.State) }

	// etcd
	etcdURL := "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.EtcdPort))
	peerURL := "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.EtcdPeerPort))
	fmt.Fprintf(cfg.Log, "kubestack: starting etcd on %s\n", etcdURL)
	etcd, err := start("etcd", filepath.Join(cfg.Assets, "etcd"), filepath.Join(cfg.Dir, "logs", "etcd.log"),
		controlplane.Etcd{Name: "kubestack", DataDir: filepath.Join(cfg.Dir, "etcd"), ClientURL: etcdURL, PeerURL: peerURL}.Args())
	if err != nil {
		return nil, err
	}
	r.Processes = append(r.Processes, etcd)
	if err := save(); err != nil {
		return nil, err
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if err := waitHealthy(ctx, cfg.Log, etcd, "etcd to serve "+etcdURL+"/health", cfg.ReadyTimeout, httpOK(etcdURL+"/health", plain, "")); err != nil {
		return nil, err
	}

	// kube-apiserver
	fmt.Fprintf(cfg.Log, "kubestack: starting kube-apiserver on %s\n", server)
	apiArgs := controlplane.APIServer{
		EtcdURL: etcdURL, BindAddress: cfg.Host, AdvertiseAddress: cfg.Host, Port: cfg.APIServerPort,
		PKIDir: cfg.Dir, CertDir: filepath.Join(cfg.Dir, "certs"),
	}.Args()
	apiArgs = append(apiArgs, cfg.ExtraAPIServerArgs...)
	api, err := start("kube-apiserver", filepath.Join(cfg.Assets, "kube-apiserver"), filepath.Join(cfg.Dir, "logs", "kube-apiserver.log"), apiArgs)
	if err != nil {
		return nil, err
	}
	r.Processes = append(r.Processes, api)
	if err := save(); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	tc, err := tlsClient(caPEM)
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, cfg.Log, api, "kube-apiserver to be ready ("+server+"/readyz)", cfg.ReadyTimeout, httpOK(server+"/readyz", tc, token)); err != nil {
		return nil, err
	}

	// kube-controller-manager
	fmt.Fprintf(cfg.Log, "kubestack: starting kube-controller-manager\n")
	kcm, err := start("kube-controller-manager", filepath.Join(cfg.Assets, "kube-controller-manager"), filepath.Join(cfg.Dir, "logs", "kube-controller-manager.log"),
		controlplane.ControllerManager{
			Kubeconfig: kc, BindAddress: cfg.Host, Port: cfg.ControllerManagerPort,
			PKIDir: cfg.Dir, CertDir: filepath.Join(cfg.Dir, "certs"),
		}.Args())
	if err != nil {
		return nil, err
	}
	r.Processes = append(r.Processes, kcm)
	if err := save(); err != nil {
		return nil, err
	}

	cl, err := newClients(kc)
	if err != nil {
		return nil, err
	}
	if cfg.CRDDir != "" {
		fmt.Fprintf(cfg.Log, "kubestack: installing CRDs from %s\n", cfg.CRDDir)
		n, err := installCRDs(ctx, cl, cfg.CRDDir, cfg.ReadyTimeout)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "kubestack: %d CRDs Established\n", n)
	}
	// The default ServiceAccount appears once the controller-manager's
	// serviceaccount controller runs; without it no pod can be admitted.
	if err := waitHealthy(ctx, cfg.Log, kcm, "kube-controller-manager to create the default ServiceAccount", cfg.ReadyTimeout, func(ctx context.Context) error {
		return defaultServiceAccountExists(ctx, cl)
	}); err != nil {
		return nil, err
	}
	if cfg.LocalNode != nil {
		node, err := startLocalNode(ctx, cfg, kc, cl, func(p *process) error {
			r.Processes = append(r.Processes, p)
			return save()
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "kubestack: localnode %s is Ready (pid %d)\n", cfg.LocalNode.Name, node.PID)
	}
	ok = true
	return r, nil
}

// Down stops the processes recorded in dir and removes dir. It is not an
// error when nothing is running.
func Down(dir string, log io.Writer) error {
	st, err := ReadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(log, "kubestack: nothing to stop (no state in %s)\n", dir)
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	stopAll(st.Processes)
	for _, p := range st.Processes {
		fmt.Fprintf(log, "kubestack: stopped %s (pid %d)\n", p.Name, p.PID)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove state %s: %w", dir, err)
	}
	return nil
}

// stopAll stops processes in reverse start order: controllers before the
// apiserver before etcd.
func stopAll(ps []*process) {
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].stop(10 * time.Second)
	}
}

// ReadState reads the state file of dir.
func ReadState(dir string) (*State, error) {
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", filepath.Join(dir, stateFile), err)
	}
	return &st, nil
}

func writeState(dir string, st *State) error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stateFile), raw, 0o600)
}
