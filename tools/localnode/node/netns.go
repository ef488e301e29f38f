package node

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Network namespaces are named and pinned under /run/netns, as `ip netns`
// does, so they outlive localnode for a successor to adopt and show up in
// `ip netns list`. Links and addresses are managed by exec'ing iproute2's
// `ip`: it is on every Linux host that has network namespaces, and keeps
// this package free of a netlink dependency.

const netnsDir = "/run/netns"

func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

// ip runs iproute2's ip with args.
func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ipExists runs ip and treats "already exists" as success, so setup steps
// can be repeated after a restart.
func ipExists(args ...string) error {
	err := ip(args...)
	if err != nil && strings.Contains(err.Error(), "File exists") {
		return nil
	}
	return err
}

// netnsExists says whether a named network namespace is pinned.
func netnsExists(name string) bool {
	_, err := os.Stat(netnsPath(name))
	return err == nil
}

// ensureNetNS creates a named network namespace unless it exists, with its
// loopback up.
func ensureNetNS(name string) error {
	if !netnsExists(name) {
		if err := ip("netns", "add", name); err != nil {
			return err
		}
	}
	return ip("-n", name, "link", "set", "lo", "up")
}

// deleteNetNS removes a named network namespace; links in it go with it
// once no process holds it.
func deleteNetNS(name string) {
	if netnsExists(name) {
		_ = ip("netns", "delete", name)
	}
}

// joinNetNS moves the calling thread into the network namespace pinned at
// path. The shim calls it on its locked thread before forking the command.
func joinNetNS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join network namespace %s: %w", path, err)
	}
	return nil
}

// inNetNS runs fn on an OS thread that has joined the network namespace at
// path; sockets fn opens stay in that namespace for good, whichever thread
// uses them later. The thread returns to the original namespace, or is
// discarded by the runtime if it cannot.
func inNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = orig.Close() }()
		if err := joinNetNS(path); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// listenIn opens a TCP listener inside a network namespace.
func listenIn(nsPath, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetNS(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// listenPacketIn opens a UDP socket inside a network namespace.
func listenPacketIn(nsPath, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := inNetNS(nsPath, func() error {
		var err error
		c, err = net.ListenPacket("udp", addr)
		return err
	})
	return c, err
}

// errNoIP reports a pod subnet with no free address left.
var errNoIP = errors.New("the pod subnet has no free address left")
