// Package testenv gives Go tests a real Kubernetes control plane: one
// kube-apiserver + etcd per test package (controller-runtime's envtest pointed
// at the binaries that `kubestack build` compiles), optionally a
// kube-controller-manager, this repository's CRDs installed, and a fresh
// namespace per test.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t)
//		...
//	}
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/libs/kubescheme"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

// Options shape the control plane of one test package.
type Options struct {
	// ControllerManager also runs kube-controller-manager (Job, garbage
	// collector, ttl-after-finished, serviceaccount and namespace
	// controllers, among the defaults), needed by anything that creates Jobs
	// or pods.
	ControllerManager bool
	// CRDDir overrides the CRDs to install; default <repo>/deploy/crds.
	CRDDir string
	// APIServerArgs are extra kube-apiserver flags, name → value.
	APIServerArgs map[string]string
	// StartTimeout bounds the whole start-up; default 90s.
	StartTimeout time.Duration
}

// Env is a running control plane with clients for it.
type Env struct {
	// Config reaches the apiserver as a system:masters user.
	Config *rest.Config
	// Scheme knows the core kinds and both agentplane API groups.
	Scheme *runtime.Scheme
	// Client is a controller-runtime client (no cache) using Scheme.
	Client client.Client
	// Kube is a client-go clientset.
	Kube kubernetes.Interface
	// RepoRoot is the directory holding go.work.
	RepoRoot string

	env *envtest.Environment
	kcm *exec.Cmd
	dir string
}

// NewScheme returns a scheme with the core kinds, CRDs and both API groups.
func NewScheme() (*runtime.Scheme, error) { return kubescheme.New() }

// Run starts the control plane, runs the package's tests and stops it. It
// returns the exit code for os.Exit. A control plane that cannot start fails
// the package with a one-line reason instead of hanging.
func Run(m *testing.M, out **Env, opts Options) int {
	e, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*out = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
	}
	return code
}

// Start brings up a control plane. Stop it with Stop.
func Start(ctx context.Context, opts Options) (*Env, error) {
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	crdDir := opts.CRDDir
	if crdDir == "" {
		crdDir = filepath.Join(root, "deploy", "crds")
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{crdDir},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := te.ControlPlane.GetAPIServer()
	api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	for k, v := range opts.APIServerArgs {
		api.Configure().Set(k, v)
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, Scheme: scheme, RepoRoot: root, env: te}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("client: %w", err)
	}
	if e.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("clientset: %w", err)
	}
	if opts.ControllerManager {
		if err := e.startControllerManager(ctx, assets, timeout); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// startControllerManager runs kube-controller-manager against the envtest
// apiserver, signing service-account tokens with envtest's key, and waits
// until it has created the default ServiceAccount.
func (e *Env) startControllerManager(ctx context.Context, assets string, timeout time.Duration) error {
	user, err := e.env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("controller-manager user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("controller-manager kubeconfig: %w", err)
	}
	e.dir, err = os.MkdirTemp("", "testenv-kcm-")
	if err != nil {
		return err
	}
	kcPath := filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(e.dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	certDir := e.env.ControlPlane.APIServer.CertDir
	cmd := exec.Command(filepath.Join(assets, kubeassets.BinControllerManager),
		"--kubeconfig="+kcPath,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*",
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--use-service-account-credentials=false",
		"--profiling=false",
		// The default 20 requests/s makes the Job controller, not the code
		// under test, the bottleneck of any test with more than a few Jobs.
		"--kube-api-qps=200", "--kube-api-burst=400",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = logFile.Close() }()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := e.Kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			e.kcm = nil
			raw, _ := os.ReadFile(logPath)
			return fmt.Errorf("kube-controller-manager exited (%w): %s", werr, lastLines(string(raw), 10))
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager did not create the default ServiceAccount within %s (log %s)", timeout, logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the controller-manager, apiserver and etcd.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil && e.kcm.Process != nil {
		_ = e.kcm.Process.Kill()
	}
	if e.env != nil {
		errs = append(errs, e.env.Stop())
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and deletes it
// when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := base + "-" + hex.EncodeToString(suffix)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// RepoRoot walks up from the working directory to the directory holding
// go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run tests inside the agentplane repository")
		}
		dir = parent
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// EtcdURL is the client URL of the control plane's etcd, for tests that
// act on storage directly (e.g. compaction).
func (e *Env) EtcdURL() string {
	if e.env == nil || e.env.ControlPlane.Etcd == nil || e.env.ControlPlane.Etcd.URL == nil {
		return ""
	}
	return e.env.ControlPlane.Etcd.URL.String()
}

// KubeconfigFor returns a kubeconfig for a new system:masters user, for
// running kubectl or another process against the control plane.
func (e *Env) KubeconfigFor(name string) ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}
