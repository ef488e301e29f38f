// Package containers runs the project's own images (`make images`) as
// Docker containers on a private network, for the fault suites of
// tests/containers: a suite kills a container mid-work and starts it
// again, and every container and network a test starts is removed by the
// test itself (no reaper image exists on these machines,
// so testcontainers-go runs with Ryuk disabled).
package containers

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	dockernet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// opTimeout bounds one Docker call: a fault suite stops by itself even
// when the engine does not answer.
const opTimeout = 60 * time.Second

func init() {
	// There is no reaper image to pull: every test removes what it starts.
	_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
}

// Image is the name and tag of one of the project's images at the version
// in the repository's VERSION file, e.g. agentplane/nats:0.1.0.
func Image(root, name string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("read the images' version: %w", err)
	}
	return "agentplane/" + name + ":" + strings.TrimSpace(string(raw)), nil
}

// RequireImages returns an error naming every image Docker does not have,
// with what to run to build them.
func RequireImages(ctx context.Context, refs ...string) error {
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer func() { _ = dc.Close() }()
	var missing []string
	for _, ref := range refs {
		if _, err := dc.ImageInspect(ctx, ref); err != nil {
			missing = append(missing, ref)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("docker has no image %s: run `make images` first", strings.Join(missing, ", "))
	}
	return nil
}

// Net is a private Docker network for one test and the containers on it.
type Net struct {
	t      testing.TB
	docker *testcontainers.DockerClient
	net    *testcontainers.DockerNetwork
}

// NewNet creates a private network; the test's cleanup removes it after
// every container started on it.
func NewNet(t testing.TB) *Net {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker: %v", err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	nw, err := network.New(ctx, network.WithLabels(map[string]string{"agentplane.test": t.Name()}))
	if err != nil {
		t.Fatalf("create a network: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := nw.Remove(ctx); err != nil {
			t.Errorf("remove network %s: %v", nw.Name, err)
		}
	})
	return &Net{t: t, docker: dc, net: nw}
}

// Gateway is the host's address on the network: containers reach
// programs the test runs on the host there.
func (n *Net) Gateway() string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := n.docker.NetworkInspect(ctx, n.net.ID, client.NetworkInspectOptions{})
	if err != nil {
		n.t.Fatalf("inspect network %s: %v", n.net.Name, err)
	}
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway.String()
		}
	}
	n.t.Fatalf("network %s has no IPv4 gateway", n.net.Name)
	return ""
}

// Spec is one container to start.
type Spec struct {
	// Alias is the container's name on the network: the others reach it
	// by it.
	Alias string
	// Image is the image's name and tag (see Image).
	Image string
	// Entrypoint and Cmd replace the image's.
	Entrypoint, Cmd []string
	// Env is the container's environment.
	Env map[string]string
	// Files are copied into the container before it starts.
	Files []testcontainers.ContainerFile
	// Ports are published on the host's loopback, e.g. "4222/tcp".
	Ports []string
	// FixedPorts publish container ports ("6443/tcp") on these ports of
	// the host's loopback, which stay the same when the container
	// restarts (Ports' may change).
	FixedPorts map[string]int
	// Binds are host paths mounted in the container, "host:container".
	Binds []string
	// User is the container's uid:gid; the image's when empty.
	User string
	// Memory is the container's memory limit in bytes, as a pod's
	// resources.limits.memory sets it; none when 0.
	Memory int64
	// WaitFor is what makes the container ready; none when nil.
	WaitFor wait.Strategy
	// HostNetwork runs the container in the host's network namespace
	// instead of on the Net, for a program that must reach what listens on
	// the host's loopback: localnode's pods share the host's network at
	// 127.0.0.1, which no container on a private network reaches. The
	// container listens on the host's ports itself, so Ports and
	// FixedPorts do not apply (HostAddr gives the port as it is), nor do
	// Disconnect and Reconnect; Alias only names it in messages. Kill and
	// Restart work as for any container.
	HostNetwork bool
}

// Container is one running (or killed) container of a Net.
type Container struct {
	testcontainers.Container
	net   *Net
	alias string
}

// Start creates and starts a container on the network; the test's cleanup
// removes it (and its anonymous volumes).
func (n *Net) Start(spec Spec) *Container {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	networks, aliases := []string{n.net.Name}, map[string][]string{n.net.Name: {spec.Alias}}
	if spec.HostNetwork {
		networks, aliases = nil, nil
	}
	req := testcontainers.ContainerRequest{
		Image:          spec.Image,
		Entrypoint:     spec.Entrypoint,
		Cmd:            spec.Cmd,
		Env:            spec.Env,
		Files:          spec.Files,
		ExposedPorts:   append(slices.Clone(spec.Ports), slices.Collect(maps.Keys(spec.FixedPorts))...),
		Networks:       networks,
		NetworkAliases: aliases,
		WaitingFor:     spec.WaitFor,
		Labels:         map[string]string{"agentplane.test": n.t.Name()},
		ConfigModifier: func(cc *container.Config) {
			if spec.User != "" {
				cc.User = spec.User
			}
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.Binds = append(hc.Binds, spec.Binds...)
			hc.Memory = spec.Memory
			if spec.HostNetwork {
				hc.NetworkMode = "host"
				return
			}
			for port, hostPort := range spec.FixedPorts {
				if hc.PortBindings == nil {
					hc.PortBindings = dockernet.PortMap{}
				}
				p := dockernet.MustParsePort(port)
				hc.PortBindings[p] = []dockernet.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}}
			}
		},
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	n.t.Cleanup(func() {
		if c == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if n.t.Failed() {
			logTail(ctx, n.t, spec.Alias, c)
		}
		if err := testcontainers.TerminateContainer(c, testcontainers.StopContext(ctx), testcontainers.RemoveVolumes()); err != nil {
			n.t.Errorf("remove container %s: %v", spec.Alias, err)
		}
	})
	if err != nil {
		n.t.Fatalf("start %s (%s): %v", spec.Alias, spec.Image, err)
	}
	return &Container{Container: c, net: n, alias: spec.Alias}
}

// Alias is the container's name on the network.
func (c *Container) Alias() string { return c.alias }

// Kill sends SIGKILL: the process dies at once, as on a node crash.
func (c *Container) Kill() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.net.docker.ContainerKill(ctx, c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		c.net.t.Fatalf("kill %s: %v", c.alias, err)
	}
	c.waitExited(ctx)
}

// Restart starts a killed or stopped container again, with its
// filesystem, mounts and network alias; its published ports may change.
func (c *Container) Restart() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		c.net.t.Fatalf("start %s again: %v", c.alias, err)
	}
}

// Pause freezes every process of the container (the cgroup freezer):
// its connections stay open and nothing answers on them, as on a stalled
// machine.
func (c *Container) Pause() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.net.docker.ContainerPause(ctx, c.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		c.net.t.Fatalf("pause %s: %v", c.alias, err)
	}
}

// Unpause lets a paused container run again.
func (c *Container) Unpause() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.net.docker.ContainerUnpause(ctx, c.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		c.net.t.Fatalf("unpause %s: %v", c.alias, err)
	}
}

// Disconnect takes the container off the network: its peers' packets to
// it go nowhere and its own find no route, as on a network partition.
// The process keeps running; Reconnect ends the partition.
func (c *Container) Disconnect() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.net.docker.NetworkDisconnect(ctx, c.net.net.ID, client.NetworkDisconnectOptions{
		Container: c.GetContainerID(), Force: true}); err != nil {
		c.net.t.Fatalf("disconnect %s: %v", c.alias, err)
	}
}

// Reconnect puts a disconnected container back on the network under its
// alias; its address on the network may change.
func (c *Container) Reconnect() {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.net.docker.NetworkConnect(ctx, c.net.net.ID, client.NetworkConnectOptions{
		Container: c.GetContainerID(), EndpointConfig: &dockernet.EndpointSettings{Aliases: []string{c.alias}}}); err != nil {
		c.net.t.Fatalf("reconnect %s: %v", c.alias, err)
	}
}

// HostAddr is host:port where the test reaches the container's port
// (e.g. "4222/tcp") from the host; it changes when the container restarts.
func (c *Container) HostAddr(port string) string {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	p, err := c.MappedPort(ctx, port)
	if err != nil {
		c.net.t.Fatalf("%s's port %s: %v", c.alias, port, err)
	}
	// The engine is local and publishes on every address of the host;
	// testcontainers' own guess (the default gateway, when it believes it
	// runs in a container) is not one this host answers on.
	return "127.0.0.1:" + p.Port()
}

// Wait waits until the container's main process has exited and returns
// its exit code; it fails the test when that takes longer than timeout.
func (c *Container) Wait(timeout time.Duration) int {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.waitExited(ctx)
}

func (c *Container) waitExited(ctx context.Context) int {
	c.net.t.Helper()
	for {
		st, err := c.State(ctx)
		if err == nil && !st.Running && !st.Restarting && st.Status != "created" {
			return st.ExitCode
		}
		select {
		case <-ctx.Done():
			c.net.t.Fatalf("%s did not exit: %v (last state error %v)", c.alias, ctx.Err(), err)
			return -1
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Output is everything the container wrote to stdout and stderr so far.
func (c *Container) Output() string {
	c.net.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := readLogs(ctx, c.Container)
	if err != nil {
		c.net.t.Fatalf("%s's logs: %v", c.alias, err)
	}
	return out
}

// readLogs reads a container's output.
func readLogs(ctx context.Context, c testcontainers.Container) (string, error) {
	rc, err := c.Logs(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	return readAll(rc)
}

func readAll(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

// FreePort is a port of the host's loopback nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// logLines is how much of a container's output a failed test shows.
const logLines = 40

// logTail puts the end of a container's output in the test's log.
func logTail(ctx context.Context, t testing.TB, alias string, c testcontainers.Container) {
	out, err := readLogs(ctx, c)
	if err != nil {
		t.Logf("%s's logs: %v", alias, err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > logLines {
		lines = lines[len(lines)-logLines:]
	}
	t.Logf("the last %d lines of %s's output:\n%s", len(lines), alias, strings.Join(lines, "\n"))
}
