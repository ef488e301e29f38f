package node

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// Pod networking. Every pod without hostNetwork gets a network namespace
// with a veth ("eth0") into a bridge, and an address from the node's
// subnet. The bridge lives in a network namespace of its own, the node's
// "switch", rather than on the host: a host with Docker has
// bridge-nf-call-iptables on and its FORWARD policy at DROP, which would
// drop pod-to-pod frames on a host bridge, and a fresh namespace has no
// firewall rules, so nothing on the host's firewall is touched. The host
// joins the switch through one more veth and holds the subnet's last
// address, so it (tests, the API server) reaches pod IPs directly; pods
// reach the host at that address. The switch also answers DNS at the
// subnet's first address, the pods' gateway, and holds the Services'
// ClusterIPs on its loopback (see services.go and dns.go).
//
// The subnet is a /24 of 10.88.0.0/16 nobody holds, taken with a lock file
// under /run/localnode so several localnodes (one per test package) can
// share a host; it is recorded in the state directory so a restarted node
// with LeavePodsRunning keeps its pods' addresses.

// NetworkConfig turns on pod networking; see Config.Network.
type NetworkConfig struct {
	// Subnet is the pods' IPv4 subnet (CIDR, /16 to /29); default: the
	// first 10.88.N.0/24 that no other localnode and no host interface
	// uses.
	Subnet string
	// ClusterDomain is the DNS domain of Services; default
	// "cluster.local".
	ClusterDomain string
}

const (
	lockDir     = "/run/localnode"
	networkFile = "network.json"
	bridgeName  = "br0"
	// servicesLink holds the ClusterIPs: the switch's loopback, since a
	// dummy link needs a kernel module not every host has.
	servicesLink  = "lo"
	uplinkName    = "uplink"
	podIfName     = "eth0"
	defaultDomain = "cluster.local"
)

// nodeNetwork is a node's switch: subnet, bridge and the address book.
type nodeNetwork struct {
	prefix   netip.Prefix
	gateway  netip.Addr // in the switch: DNS and ClusterIPs' next hop
	hostAddr netip.Addr // the host's end
	domain   string
	id       string
	lock     *os.File

	mu   sync.Mutex
	used map[netip.Addr]types.UID
}

func (nw *nodeNetwork) switchNS() string { return "localnode-sw-" + nw.id }
func (nw *nodeNetwork) hostLink() string { return "lnh-" + nw.id }

// podNetState is what a pod's sandbox records in its pod directory.
type podNetState struct {
	IP    string `json:"ip"`
	NetNS string `json:"netns"`
}

// startNetwork takes a subnet and builds the switch.
func startNetwork(cfg *NetworkConfig, stateDir string) (*nodeNetwork, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, fmt.Errorf("localnode: pod network: %w", err)
	}
	domain := cfg.ClusterDomain
	if domain == "" {
		domain = defaultDomain
	}
	type candidate struct {
		subnet string
		// mine: named by Config or recorded by our previous run, so
		// what exists of it is reused (adopted pods keep their network).
		mine bool
	}
	var candidates []candidate
	if cfg.Subnet != "" {
		candidates = []candidate{{cfg.Subnet, true}}
	} else {
		if raw, err := os.ReadFile(filepath.Join(stateDir, networkFile)); err == nil {
			var rec struct{ Subnet string }
			if json.Unmarshal(raw, &rec) == nil && rec.Subnet != "" {
				candidates = append(candidates, candidate{rec.Subnet, true})
			}
		}
		for i := 0; i < 256; i++ {
			candidates = append(candidates, candidate{fmt.Sprintf("10.88.%d.0/24", i), false})
		}
	}
	for _, c := range candidates {
		p, err := netip.ParsePrefix(c.subnet)
		if err != nil || !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 29 {
			return nil, fmt.Errorf("localnode: pod subnet %q: want an IPv4 CIDR from /16 to /29", c.subnet)
		}
		p = p.Masked()
		nw := &nodeNetwork{prefix: p, domain: domain, used: map[netip.Addr]types.UID{}}
		sum := sha256.Sum256([]byte(p.String()))
		nw.id = hex.EncodeToString(sum[:4])
		if !nw.tryLock() {
			continue
		}
		if !c.mine {
			if netnsExists(nw.switchNS()) {
				// Left by a localnode that died: its pods' links go with
				// the switch, so no stale address stays on the bridge.
				_ = ip("link", "delete", nw.hostLink())
				deleteNetNS(nw.switchNS())
			}
			if hostUses(p) {
				_ = nw.lock.Close()
				continue
			}
		}
		nw.gateway = p.Addr().Next()
		nw.hostAddr = lastAddr(p)
		if err := nw.build(); err != nil {
			_ = nw.lock.Close()
			return nil, fmt.Errorf("localnode: pod network %s: %w", p, err)
		}
		rec, _ := json.Marshal(map[string]string{"Subnet": p.String()})
		if err := os.WriteFile(filepath.Join(stateDir, networkFile), rec, 0o644); err != nil {
			return nil, fmt.Errorf("localnode: record pod network: %w", err)
		}
		return nw, nil
	}
	return nil, errors.New("localnode: pod network: no free subnet (another localnode holds each one)")
}

// tryLock takes the subnet's lock file; the kernel drops the lock when
// this process ends, however it ends.
func (nw *nodeNetwork) tryLock() bool {
	f, err := os.OpenFile(filepath.Join(lockDir, "net-"+nw.id+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		_ = f.Close()
		return false
	}
	nw.lock = f
	return true
}

// hostUses says whether a host interface has an address in p.
func hostUses(p netip.Prefix) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ap, ok := netip.AddrFromSlice(n.IP); ok && (p.Contains(ap.Unmap()) || n.Contains(p.Addr().AsSlice())) {
				return true
			}
		}
	}
	return false
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(a[:], v-1)
	return netip.AddrFrom4(a)
}

// build creates (or completes) the switch namespace, its bridge and the
// host's veth into the bridge. Every step
// tolerates what a previous run left.
func (nw *nodeNetwork) build() error {
	sw := nw.switchNS()
	plen := fmt.Sprintf("/%d", nw.prefix.Bits())
	if err := ensureNetNS(sw); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", sw, "link", "add", bridgeName, "type", "bridge"},
		// A fixed address: a bridge otherwise takes its lowest port's,
		// which changes as pods come and go, and the host and pods would
		// keep sending to a stale ARP entry for the gateway.
		{"-n", sw, "link", "set", bridgeName, "address", "02:" + nw.id[0:2] + ":" + nw.id[2:4] + ":" + nw.id[4:6] + ":" + nw.id[6:8] + ":01"},
		{"-n", sw, "addr", "add", nw.gateway.String() + plen, "dev", bridgeName},
		{"-n", sw, "link", "set", bridgeName, "up"},
	}
	if ip("link", "show", nw.hostLink()) != nil {
		steps = append(steps, []string{"link", "add", nw.hostLink(), "type", "veth", "peer", "name", uplinkName, "netns", sw})
	}
	steps = append(steps,
		[]string{"-n", sw, "link", "set", uplinkName, "master", bridgeName, "up"},
		[]string{"addr", "add", nw.hostAddr.String() + plen, "dev", nw.hostLink()},
		[]string{"link", "set", nw.hostLink(), "up"},
	)
	for _, s := range steps {
		if err := ipExists(s...); err != nil {
			return err
		}
	}
	return nil
}

// destroy removes the switch and the host's link, and lets go of the
// subnet.
func (nw *nodeNetwork) destroy() {
	_ = ip("link", "delete", nw.hostLink())
	deleteNetNS(nw.switchNS())
	_ = nw.lock.Close()
}

// podSandbox is a pod's network namespace and address.
type podSandbox struct {
	ip    netip.Addr
	netns string
}

func podNetNSName(uid types.UID) string { return "localnode-" + string(uid) }

// podVeth names the switch end of a pod's veth (at most 15 bytes).
func podVeth(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "lnp-" + hex.EncodeToString(sum[:5])
}

// setupPod creates a pod's network namespace and veth, or completes what a
// previous run left (same address), recording both in podDir.
func (nw *nodeNetwork) setupPod(uid types.UID, podDir string) (*podSandbox, error) {
	sb := &podSandbox{netns: podNetNSName(uid)}
	if raw, err := os.ReadFile(filepath.Join(podDir, networkFile)); err == nil {
		var st podNetState
		if json.Unmarshal(raw, &st) == nil {
			if a, err := netip.ParseAddr(st.IP); err == nil && nw.prefix.Contains(a) {
				sb.ip = a
			}
		}
	}
	if err := nw.reserve(uid, sb); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(podNetState{IP: sb.ip.String(), NetNS: sb.netns})
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(podDir, networkFile), raw, 0o644); err != nil {
		return nil, err
	}
	if err := ensureNetNS(sb.netns); err != nil {
		return nil, err
	}
	sw, veth := nw.switchNS(), podVeth(uid)
	var steps [][]string
	if ip("-n", sb.netns, "link", "show", podIfName) != nil {
		steps = append(steps, []string{"link", "add", veth, "netns", sw, "type", "veth", "peer", "name", podIfName, "netns", sb.netns})
	}
	steps = append(steps,
		[]string{"-n", sw, "link", "set", veth, "master", bridgeName, "up"},
		[]string{"-n", sb.netns, "addr", "add", fmt.Sprintf("%s/%d", sb.ip, nw.prefix.Bits()), "dev", podIfName},
		[]string{"-n", sb.netns, "link", "set", podIfName, "up"},
		[]string{"-n", sb.netns, "route", "add", "default", "via", nw.gateway.String()},
	)
	for _, s := range steps {
		if err := ipExists(s...); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// reserve marks sb's recorded address as the pod's, or picks a free one.
func (nw *nodeNetwork) reserve(uid types.UID, sb *podSandbox) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if sb.ip.IsValid() {
		if owner, ok := nw.used[sb.ip]; !ok || owner == uid {
			nw.used[sb.ip] = uid
			return nil
		}
	}
	for a := nw.gateway.Next(); nw.prefix.Contains(a) && a != nw.hostAddr; a = a.Next() {
		if _, ok := nw.used[a]; !ok {
			nw.used[a] = uid
			sb.ip = a
			return nil
		}
	}
	return errNoIP
}

// teardownPod deletes a pod's network namespace and frees its address.
func (nw *nodeNetwork) teardownPod(uid types.UID, podDir string) {
	deleteNetNS(podNetNSName(uid))
	_ = os.Remove(filepath.Join(podDir, networkFile))
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for a, owner := range nw.used {
		if owner == uid {
			delete(nw.used, a)
		}
	}
}
