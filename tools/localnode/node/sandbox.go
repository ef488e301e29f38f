package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The pod "sandbox" is what a pod's containers share: with pod networking
// and no hostNetwork, a network namespace, an address and the API server
// forwarder; for every pod, the /etc/hosts and /etc/resolv.conf its image-
// mode containers (and host-mode ones in a pod network namespace) see.

const (
	etcDir     = "etc"
	hostsFile  = "hosts"
	resolvFile = "resolv.conf"
)

// setupSandbox makes the pod's sandbox, or completes what an earlier run
// of the node left (the same address).
func (w *podWorker) setupSandbox(pod *corev1.Pod) error {
	n := w.n
	w.mu.Lock()
	have := w.sandbox != nil
	w.mu.Unlock()
	if n.net != nil && !pod.Spec.HostNetwork && !have {
		sb, err := n.net.setupPod(pod.UID, w.dir)
		if err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
		fwd, err := n.startAPIProxy(sb)
		if err != nil {
			n.net.teardownPod(pod.UID, w.dir)
			return fmt.Errorf("forward the API server into the pod: %w", err)
		}
		w.mu.Lock()
		w.sandbox, w.apiFwd, w.addr = sb, fwd, sb.ip.String()
		w.mu.Unlock()
	}
	return w.writeEtcFiles(pod)
}

// closeSandbox stops the API server forwarder; teardown also deletes the
// network namespace.
func (w *podWorker) closeSandbox(teardown bool) {
	w.mu.Lock()
	fwd := w.apiFwd
	w.apiFwd = nil
	had := w.sandbox != nil
	if teardown {
		w.sandbox = nil
	}
	w.mu.Unlock()
	if fwd != nil {
		fwd.close()
	}
	if teardown && had && w.n.net != nil {
		w.n.net.teardownPod(w.uid, w.dir)
	}
}

// podIP is the pod's address: its own in a pod network namespace (kept
// for the status once the pod has ended), else the node's.
func (w *podWorker) podIP() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.podIPLocked()
}

// podIPLocked is podIP for callers holding mu: "" while a pod that gets
// its own address has none yet, as a kubelet reports it.
func (w *podWorker) podIPLocked() string {
	if w.addr != "" {
		return w.addr
	}
	if w.n.net != nil && !w.pod.Spec.HostNetwork {
		return ""
	}
	return hostIP
}

// netNSPath is the pod's network namespace, or "" on the host network.
func (w *podWorker) netNSPath() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sandbox != nil {
		return netnsPath(w.sandbox.netns)
	}
	return ""
}

// etcMounts are the bind mounts of the pod's hosts and resolv.conf files.
func (w *podWorker) etcMounts() []mountSpec {
	return []mountSpec{
		{Source: filepath.Join(w.dir, etcDir, hostsFile), Target: "/etc/hosts"},
		{Source: filepath.Join(w.dir, etcDir, resolvFile), Target: "/etc/resolv.conf"},
	}
}

// writeEtcFiles writes the pod's /etc/hosts and /etc/resolv.conf as a
// kubelet does: in a pod network, the pod's own name and address and the
// cluster DNS with its search path; on the host network, the host's files.
// hostAliases and dnsConfig are added either way.
func (w *podWorker) writeEtcFiles(pod *corev1.Pod) error {
	dir := filepath.Join(w.dir, etcDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var hosts, resolv strings.Builder
	w.mu.Lock()
	sb := w.sandbox
	w.mu.Unlock()
	nw := w.n.net
	clusterDNS := sb != nil && pod.Spec.DNSPolicy != corev1.DNSDefault && pod.Spec.DNSPolicy != corev1.DNSNone
	if sb != nil {
		hostname := podHostname(pod)
		names := hostname
		if pod.Spec.Subdomain != "" {
			names = fmt.Sprintf("%s.%s.%s.svc.%s\t%s", hostname, pod.Spec.Subdomain, pod.Namespace, nw.domain, hostname)
		}
		fmt.Fprintf(&hosts, "# Kubernetes-managed hosts file (localnode).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", sb.ip, names)
	} else {
		hosts.Write(readOr("/etc/hosts", "127.0.0.1\tlocalhost\n"))
	}
	for _, a := range pod.Spec.HostAliases {
		fmt.Fprintf(&hosts, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	var searches, servers, options []string
	if clusterDNS {
		d := nw.domain
		searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		servers = []string{nw.gateway.String()}
		options = []string{"ndots:5"}
	} else if pod.Spec.DNSPolicy != corev1.DNSNone {
		resolv.Write(readOr("/etc/resolv.conf", ""))
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		searches = append(searches, c.Searches...)
		for _, o := range c.Options {
			if o.Value != nil {
				options = append(options, o.Name+":"+*o.Value)
			} else {
				options = append(options, o.Name)
			}
		}
	}
	if len(searches) > 0 {
		fmt.Fprintf(&resolv, "search %s\n", strings.Join(searches, " "))
	}
	for _, s := range servers {
		fmt.Fprintf(&resolv, "nameserver %s\n", s)
	}
	if len(options) > 0 {
		fmt.Fprintf(&resolv, "options %s\n", strings.Join(options, " "))
	}
	for name, content := range map[string]string{hostsFile: hosts.String(), resolvFile: resolv.String()} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p+".tmp", []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return err
		}
	}
	return nil
}

func readOr(path, def string) []byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []byte(def)
	}
	return raw
}
