package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/containers"
	"github.com/agentplane/agentplane/tools/kubestack/controlplane"
)

// The realtime suite's settings.
const (
	// realtimeNS holds the key Secret agent-controller and realtime-gateway
	// share (docs/realtime.md, the run token), and is the gateway's own
	// namespace.
	realtimeNS = "agentplane-system"
	// realtimePort is a realtime run pod's session port; on localnode's
	// host network it is the host's own.
	realtimePort = 8090
	// gatewayDialTimeout is the gateway's --dial-timeout: its bound on
	// connecting to a run pod.
	gatewayDialTimeout = 5 * time.Second
	// gatewayKeepalive is the gateway's bound on noticing that a pod went
	// silent on an open connection: a ping 20 s after the last byte read
	// from it, and 10 s for the ping's answer (docs/realtime-gateway.md,
	// Forwarding).
	gatewayKeepalive = 30 * time.Second
	// realtimeSlack is what a loaded machine may add to a bound.
	realtimeSlack = 10 * time.Second
	// callGuard bounds each call the suite makes, so a gateway that hangs
	// fails the suite rather than hangs it.
	callGuard = 2 * time.Minute
	// slowPrompt makes the mock CLI stream its turn slowly (MOCKAGENT_DELAY
	// between lines), so the suite can act while the turn streams.
	slowPrompt = "mock:slow count the steps"
)

// realtimeStation creates a realtime AgentDefinition and its Station,
// both named name: the mock claude CLI, whose slow turns (slowPrompt)
// stream 12 steps and the usual work half a second apart, about ten
// seconds in all.
func (p *platform) realtimeStation(t *testing.T, ns, name string, deadline time.Duration) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-sonnet-4-5", Prompt: "Say hello.",
			Execution: agentsv1alpha1.ExecutionRealtime, Resources: &agentsv1alpha1.AgentResources{
				Env: []agentsv1alpha1.EnvEntry{{Name: "MOCKAGENT_STEPS", Value: "12"}, {Name: "MOCKAGENT_DELAY", Value: "500ms"}}}}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: int32(deadline / time.Minute),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: images["mockagent"]}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := p.cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// gateway is realtime-gateway in a container on the host's network
// (containers.Spec.HostNetwork): the run pods' address, 127.0.0.1, is the
// host's loopback, which a container on the private network cannot reach.
// It listens on ports of the host's loopback, which stay the same across
// a restart.
type gateway struct {
	c *containers.Container
	// grpcAddr is PromptService's address, healthAddr /readyz's.
	grpcAddr, healthAddr string
}

// startGateway starts realtime-gateway talking to the API server through
// its port on the host, and waits until it is ready.
func (p *platform) startGateway(t *testing.T) *gateway {
	t.Helper()
	// The network's kubeconfig names the API server by its alias, which
	// the host's network does not resolve.
	kubeconfig := filepath.Join(t.TempDir(), "host.kubeconfig")
	ca := "/pki/" + controlplane.CACertFile
	if err := os.WriteFile(kubeconfig, []byte(controlplane.Kubeconfig(p.kube.Config.Host, ca, p.kube.Config.BearerToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	files := append(slices.Clone(p.kube.PKIFiles),
		// The image's user must read it.
		testcontainers.ContainerFile{HostFilePath: kubeconfig, ContainerFilePath: "/pki/host.kubeconfig", FileMode: 0o644})
	g := &gateway{
		grpcAddr:   "127.0.0.1:" + strconv.Itoa(containers.FreePort(t)),
		healthAddr: "127.0.0.1:" + strconv.Itoa(containers.FreePort(t)),
	}
	g.c = p.net.Start(containers.Spec{
		Alias: "realtime-gateway", Image: images["realtime-gateway"], HostNetwork: true, Files: files,
		Cmd: []string{
			"--kubeconfig=/pki/host.kubeconfig", "--pod-name=realtime-gateway", "--pod-namespace=" + realtimeNS,
			"--grpc-bind-address=" + g.grpcAddr, "--health-probe-bind-address=" + g.healthAddr,
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(containers.FreePort(t)),
			"--dial-timeout=" + gatewayDialTimeout.String(),
		},
	})
	g.waitReady(t)
	return g
}

// waitReady waits until the gateway answers /readyz (its caches synced and
// the key loaded), failing the test after two minutes; it returns how
// long it waited.
func (g *gateway) waitReady(t *testing.T) time.Duration {
	t.Helper()
	began := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get("http://" + g.healthAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(began)
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Since(began) > 2*time.Minute {
			t.Fatalf("realtime-gateway is not ready after 2m: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// as is a context carrying the caller's token as `agentctl --token` sends
// it, ending after callGuard.
func as(token string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), callGuard)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), cancel
}

// dial opens a connection of its own to the gateway, as each `agentctl
// prompt` does.
func (g *gateway) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// promptCall is one Prompt call through the gateway. Its fields past the
// channels are set once done is closed.
type promptCall struct {
	text  string
	began time.Time
	// firstEvent is closed when the turn's first event arrives.
	firstEvent chan struct{}
	done       chan struct{}
	events     int
	end        *realtimev1.TurnEnd
	err        error
	took       time.Duration
	// guardHit is true when the suite's own guard ended the call: the
	// gateway did not answer within callGuard.
	guardHit bool
}

// prompt starts one Prompt call of text to ref as the caller whose token
// is token.
func (g *gateway) prompt(t *testing.T, token string, ref *realtimev1.AgentRef, text string) *promptCall {
	t.Helper()
	conn := g.dial(t)
	c := &promptCall{text: text, began: time.Now(), firstEvent: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer func() { _ = conn.Close() }()
		ctx, cancel := as(token)
		defer cancel()
		c.err = c.stream(ctx, realtimev1.NewPromptServiceClient(conn), ref)
		c.took = time.Since(c.began)
		c.guardHit = ctx.Err() != nil && status.Code(c.err) == codes.DeadlineExceeded
	}()
	return c
}

// stream makes the call and reads its answer to the end.
func (c *promptCall) stream(ctx context.Context, cl realtimev1.PromptServiceClient, ref *realtimev1.AgentRef) error {
	s, err := cl.Prompt(ctx, &realtimev1.PromptRequest{Agent: ref, Text: c.text})
	if err != nil {
		return err
	}
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if r.GetEvent() != nil {
			if c.events == 0 {
				close(c.firstEvent)
			}
			c.events++
		}
		if e := r.GetTurnEnd(); e != nil {
			c.end = e
		}
	}
}

// wait waits for the call to return; the suite's guard bounds it.
func (c *promptCall) wait() *promptCall {
	<-c.done
	return c
}

// waitFirstEvent waits until the turn streams its first event, failing
// the test when the call ends first or nothing comes within a minute.
func (c *promptCall) waitFirstEvent(t *testing.T) {
	t.Helper()
	select {
	case <-c.firstEvent:
	case <-c.done:
		t.Fatalf("prompt %q ended before its first event: %v (turn end %v)", c.text, c.err, c.end)
	case <-time.After(time.Minute):
		t.Fatalf("prompt %q: no event within a minute", c.text)
	}
}

// served is a prompt that reached the session and ended its turn, and the
// calls refused before it.
type served struct {
	*promptCall
	// refused are the calls refused before it, by code.
	refused map[codes.Code]int
	// after is how long it took from the first try.
	after time.Duration
}

// promptUntilServed prompts until a call gets through: while the run is
// not serving yet, a turn is still running in the pod (the initial one, or
// one whose caller left), or the gateway is not reachable, a caller tries
// again. It fails the test after within, or at any other refusal.
func (g *gateway) promptUntilServed(t *testing.T, token string, ref *realtimev1.AgentRef, text string, within time.Duration) served {
	t.Helper()
	began := time.Now()
	refused := map[codes.Code]int{}
	for {
		c := g.prompt(t, token, ref, text).wait()
		if c.err == nil {
			if c.end == nil {
				t.Fatalf("prompt %q: the stream ended without a turn end (%d events)", text, c.events)
			}
			return served{promptCall: c, refused: refused, after: time.Since(began)}
		}
		code := status.Code(c.err)
		refused[code]++
		if (code != codes.Unavailable && code != codes.FailedPrecondition) || time.Since(began) > within {
			t.Fatalf("prompt %q: %v (after %s; refused before: %v)", text, c.err, time.Since(began).Round(time.Millisecond), refused)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// session is GetSession of ref.
func (g *gateway) session(t *testing.T, token string, ref *realtimev1.AgentRef) *realtimev1.GetSessionResponse {
	t.Helper()
	conn := g.dial(t)
	defer func() { _ = conn.Close() }()
	ctx, cancel := as(token)
	defer cancel()
	info, err := realtimev1.NewPromptServiceClient(conn).GetSession(ctx, &realtimev1.GetSessionRequest{Agent: ref})
	if err != nil {
		t.Fatalf("GetSession %s/%s: %v", ref.GetNamespace(), ref.GetName(), err)
	}
	return info
}

// closeSession is Close of ref.
func (g *gateway) closeSession(t *testing.T, token string, ref *realtimev1.AgentRef) *realtimev1.CloseResponse {
	t.Helper()
	conn := g.dial(t)
	defer func() { _ = conn.Close() }()
	ctx, cancel := as(token)
	defer cancel()
	out, err := realtimev1.NewPromptServiceClient(conn).Close(ctx, &realtimev1.CloseRequest{Agent: ref})
	if err != nil {
		t.Fatalf("Close %s/%s: %v", ref.GetNamespace(), ref.GetName(), err)
	}
	return out
}
