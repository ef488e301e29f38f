// Package controlplane is how the project's local control planes are
// configured: the certificates and tokens (WritePKI) and the command lines
// of etcd, kube-apiserver and kube-controller-manager. kubestack runs them
// as processes on loopback; the fault suites (tests/containers) run the
// same command lines in containers, so both planes behave alike.
package controlplane

import (
	"path/filepath"
	"strconv"
)

// The service range and its first address, which the serving certificate
// covers so that in-cluster clients can verify the apiserver.
const (
	ServiceClusterRange = "10.0.0.0/24"
	ServiceClusterIP    = "10.0.0.1"
)

// Etcd is a single-member etcd.
type Etcd struct {
	// Name is the member's name; DataDir where it keeps its data.
	Name, DataDir string
	// ClientURL and PeerURL are what it announces; it listens on
	// ListenClientURL and ListenPeerURL, the announced ones when empty
	// (etcd listens on addresses only, not on names).
	ClientURL, PeerURL             string
	ListenClientURL, ListenPeerURL string
}

// Args is the command line.
func (e Etcd) Args() []string {
	listenClient, listenPeer := e.ListenClientURL, e.ListenPeerURL
	if listenClient == "" {
		listenClient = e.ClientURL
	}
	if listenPeer == "" {
		listenPeer = e.PeerURL
	}
	return []string{
		"--name=" + e.Name, "--data-dir=" + e.DataDir,
		"--listen-client-urls=" + listenClient, "--advertise-client-urls=" + e.ClientURL,
		"--listen-peer-urls=" + listenPeer, "--initial-advertise-peer-urls=" + e.PeerURL,
		"--initial-cluster=" + e.Name + "=" + e.PeerURL,
		// A test plane is thrown away; fsync only slows it down.
		"--unsafe-no-fsync=true",
	}
}

// APIServer says where a kube-apiserver finds etcd and its files, and
// where it listens.
type APIServer struct {
	// EtcdURL is etcd's client URL.
	EtcdURL string
	// BindAddress and AdvertiseAddress are the addresses it serves on and
	// announces; Port its secure port.
	BindAddress, AdvertiseAddress string
	Port                          int
	// PKIDir holds WritePKI's files; CertDir is a writable directory.
	PKIDir, CertDir string
}

// Args is the command line.
func (a APIServer) Args() []string {
	pki := func(f string) string { return filepath.Join(a.PKIDir, f) }
	return []string{
		"--etcd-servers=" + a.EtcdURL,
		"--bind-address=" + a.BindAddress, "--advertise-address=" + a.AdvertiseAddress, "--secure-port=" + strconv.Itoa(a.Port),
		"--cert-dir=" + a.CertDir,
		"--tls-cert-file=" + pki(ServingCertFile), "--tls-private-key-file=" + pki(ServingKeyFile),
		"--client-ca-file=" + pki(CACertFile),
		"--token-auth-file=" + pki(TokenFile),
		"--authorization-mode=RBAC",
		// As OpenShift does: setting blockOwnerDeletion needs update on the
		// owner's finalizers, so a controller's RBAC is checked for it here.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki(SAPubFile),
		"--service-account-signing-key-file=" + pki(SAKeyFile),
		"--service-cluster-ip-range=" + ServiceClusterRange,
		"--allow-privileged=true",
		// The local node has only an InternalIP; never try DNS for it.
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}
}

// ControllerManager says where a kube-controller-manager finds the
// apiserver and its files, and where it listens.
type ControllerManager struct {
	// Kubeconfig reaches the apiserver as an admin.
	Kubeconfig string
	// BindAddress and Port are where it serves /healthz.
	BindAddress string
	Port        int
	// PKIDir holds WritePKI's files; CertDir is a writable directory.
	PKIDir, CertDir string
}

// Args is the command line: every controller, no leader election (one
// replica), and a client limit high enough that the Job controller is
// not what a test measures.
func (c ControllerManager) Args() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=" + c.BindAddress, "--secure-port=" + strconv.Itoa(c.Port),
		"--cert-dir=" + c.CertDir,
		"--leader-elect=false",
		"--controllers=*",
		"--service-account-private-key-file=" + filepath.Join(c.PKIDir, SAKeyFile),
		"--root-ca-file=" + filepath.Join(c.PKIDir, CACertFile),
		"--use-service-account-credentials=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--service-cluster-ip-range=" + ServiceClusterRange,
		"--profiling=false",
	}
}
