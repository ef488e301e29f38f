package containers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/tools/imagebuild/image"
	"github.com/agentplane/agentplane/tools/kubestack/controlplane"
)

// Where the control plane's files live inside its containers.
const (
	pkiDir = "/pki"
	// APIServerPort is the apiserver's port on the network.
	APIServerPort = 6443
)

// KubeImage returns the image holding etcd, kube-apiserver and
// kube-controller-manager, built from the control-plane binaries `make
// kube-binaries` cached (they are static) and loaded into Docker the
// first time it is asked for.
func KubeImage(ctx context.Context) (string, error) {
	tag := "agentplane-test/kube:" + kubeassets.KubeVersion + "-etcd-" + kubeassets.EtcdVersion
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	defer func() { _ = dc.Close() }()
	if _, err := dc.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	}
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		return "", err
	}
	spec := image.Spec{Created: time.Unix(0, 0), Arch: runtime.GOARCH, Title: "kube"}
	for _, b := range []string{kubeassets.BinEtcd, kubeassets.BinAPIServer, kubeassets.BinControllerManager} {
		spec.Binaries = append(spec.Binaries, image.Binary{Source: filepath.Join(assets, b), Path: "/usr/local/bin/" + b})
	}
	spec.CABundle, _ = image.MozillaBundle()
	img, err := image.Build(spec)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", tag, err)
	}
	tmp, err := os.MkdirTemp("", "agentplane-kube-image-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	tarball := filepath.Join(tmp, "kube.tar")
	if err := image.WriteTarball(tarball, tag, img); err != nil {
		return "", fmt.Errorf("write %s: %w", tag, err)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	res, err := dc.ImageLoad(ctx, f)
	if err != nil {
		return "", fmt.Errorf("docker load %s: %w", tag, err)
	}
	defer func() { _ = res.Close() }()
	// The load is done when its progress stream ends.
	if _, err := readAll(res); err != nil {
		return "", fmt.Errorf("docker load %s: %w", tag, err)
	}
	return tag, nil
}

// ControlPlane is etcd, kube-apiserver and kube-controller-manager, each
// in a container of a Net, so a suite can kill, restart or pause each.
type ControlPlane struct {
	Etcd, APIServer, ControllerManager *Container
	// Config reaches the apiserver from the host as an admin; its address
	// stays the same when the apiserver's container restarts.
	Config *rest.Config
	// Kubeconfig is an admin kubeconfig for containers on the network
	// (server https://apiserver:6443, the CA at /pki/ca.crt, which
	// PKIFiles copies in).
	Kubeconfig []byte
	// PKIFiles are the CA and the kubeconfig, to copy into a container
	// that talks to the apiserver (Spec.Files).
	PKIFiles []testcontainers.ContainerFile

	dir string
}

// StartControlPlane starts the control plane on n with the project's CRDs
// installed, and returns once the apiserver is ready.
func StartControlPlane(t testing.TB, n *Net, crdDir string) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*opTimeout)
	defer cancel()
	ref, err := KubeImage(ctx)
	if err != nil {
		t.Fatalf("control-plane image: %v", err)
	}
	dir := t.TempDir()
	token, err := controlplane.WritePKI(dir, "apiserver")
	if err != nil {
		t.Fatalf("control-plane certificates: %v", err)
	}
	cp := &ControlPlane{dir: dir}
	in := filepath.Join(pkiDir, "kubeconfig")
	cp.Kubeconfig = []byte(controlplane.Kubeconfig(fmt.Sprintf("https://apiserver:%d", APIServerPort), filepath.Join(pkiDir, controlplane.CACertFile), token))
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), cp.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	var pki []testcontainers.ContainerFile
	for _, f := range []string{controlplane.CACertFile, controlplane.ServingCertFile, controlplane.ServingKeyFile,
		controlplane.SAKeyFile, controlplane.SAPubFile, controlplane.TokenFile, "kubeconfig"} {
		// The files are the test's own; the images' user must read them.
		file := testcontainers.ContainerFile{HostFilePath: filepath.Join(dir, f), ContainerFilePath: filepath.Join(pkiDir, f), FileMode: 0o644}
		pki = append(pki, file)
		if f == controlplane.CACertFile || f == "kubeconfig" {
			cp.PKIFiles = append(cp.PKIFiles, file)
		}
	}

	cp.Etcd = n.Start(Spec{
		Alias: "etcd", Image: ref, Entrypoint: []string{"/usr/local/bin/etcd"},
		Cmd: controlplane.Etcd{
			Name: "etcd", DataDir: "/tmp/etcd",
			ClientURL: "http://etcd:2379", PeerURL: "http://etcd:2380",
			ListenClientURL: "http://0.0.0.0:2379", ListenPeerURL: "http://0.0.0.0:2380",
		}.Args(),
	})
	hostPort := FreePort(t)
	cp.APIServer = n.Start(Spec{
		Alias: "apiserver", Image: ref, Entrypoint: []string{"/usr/local/bin/kube-apiserver"},
		Cmd: controlplane.APIServer{
			EtcdURL: "http://etcd:2379", BindAddress: "0.0.0.0", Port: APIServerPort,
			PKIDir: pkiDir, CertDir: "/tmp/certs",
		}.Args(),
		Files:      pki,
		FixedPorts: map[string]int{fmt.Sprintf("%d/tcp", APIServerPort): hostPort},
	})
	// The advertise address is left to the apiserver (its own address on
	// the network): the kubernetes Service's endpoint must be an IP.
	cp.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", hostPort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, controlplane.CACertFile)},
		QPS:             200, Burst: 400,
	}
	cp.WaitReady(t, 2*time.Minute)
	cp.ControllerManager = n.Start(Spec{
		Alias: "kube-controller-manager", Image: ref, Entrypoint: []string{"/usr/local/bin/kube-controller-manager"},
		Cmd: controlplane.ControllerManager{
			Kubeconfig: in, BindAddress: "0.0.0.0", Port: 10257, PKIDir: pkiDir, CertDir: "/tmp/certs",
		}.Args(),
		Files: pki,
	})
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{crdDir}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install the CRDs of %s: %v", crdDir, err)
	}
	return cp
}

// WaitReady waits until the apiserver answers /readyz, failing the test
// after within.
func (cp *ControlPlane) WaitReady(t testing.TB, within time.Duration) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apiserver is not ready after %s: %v", within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
