package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeReadiness runs a container's readiness probe while the instance
// runs and reflects it in the container's Ready flag.
func (w *podWorker) probeReadiness(c *corev1.Container, isInit bool, idx int, in *instance, done <-chan struct{}) {
	if c.ReadinessProbe == nil {
		return
	}
	w.runProbe(c, c.ReadinessProbe, in, done, func(ok bool) {
		if w.setReady(isInit, idx, ok) {
			w.status.flush()
		}
	})
}

// probeLiveness runs a container's liveness probe while the instance runs;
// once it fails failureThreshold times in a row the instance is stopped and
// the restart policy decides what follows, as with a kubelet.
func (w *podWorker) probeLiveness(c *corev1.Container, in *instance, done <-chan struct{}) {
	if c.LivenessProbe == nil {
		return
	}
	grace := terminationGrace(w.latest())
	if g := c.LivenessProbe.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	w.runProbe(c, c.LivenessProbe, in, done, func(ok bool) {
		if !ok {
			w.n.log.Info("liveness probe failed, stopping container", "pod", w.ns+"/"+w.name, "container", c.Name)
			go in.stop(grace)
		}
	})
}

// runProbe probes every period until done and reports each settled result:
// true after successThreshold passes in a row, false after
// failureThreshold failures in a row.
func (w *podWorker) runProbe(c *corev1.Container, p *corev1.Probe, in *instance, done <-chan struct{}, report func(bool)) {
	period := seconds(p.PeriodSeconds, 10)
	success, failure := int(max(p.SuccessThreshold, 1)), int(p.FailureThreshold)
	if failure <= 0 {
		failure = 3
	}
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	okRun, failRun := 0, 0
	for {
		select {
		case <-done:
			return
		case <-w.detachCh:
			return
		case <-time.After(wait):
		}
		wait = period
		if err := w.probeOnce(c, p, in); err == nil {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
		}
		switch {
		case okRun >= success:
			report(true)
		case failRun >= failure:
			report(false)
		}
	}
}

// probeOnce runs one probe attempt within its timeout.
func (w *podWorker) probeOnce(c *corev1.Container, p *corev1.Probe, in *instance) error {
	timeout := seconds(p.TimeoutSeconds, 1)
	if p.Exec != nil {
		// The shim times the command itself, so its own start-up (slow in
		// a race-instrumented binary) doesn't count; the context only
		// bounds a shim that hangs.
		ctx, cancel := context.WithTimeout(w.runCtx, timeout+shimStartAllowance)
		defer cancel()
		return w.execProbe(ctx, c, p.Exec.Command, timeout, in)
	}
	ctx, cancel := context.WithTimeout(w.runCtx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return httpProbe(ctx, c, p.HTTPGet, w.podIP())
	case p.TCPSocket != nil:
		port, err := resolvePort(c, p.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = w.podIP()
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("tcp probe: %w", err)
		}
		return conn.Close()
	case p.GRPC != nil:
		return fmt.Errorf("grpc probes are not supported by localnode")
	}
	return fmt.Errorf("probe has no handler")
}

// execProbe runs the command through the shim, with the container's env and
// mounts, in a fresh mount namespace like the container's.
func (w *podWorker) execProbe(ctx context.Context, c *corev1.Container, argv []string, timeout time.Duration, in *instance) error {
	raw, err := os.ReadFile(filepath.Join(in.dir, specFile))
	if err != nil {
		return fmt.Errorf("read container spec for exec probe: %w", err)
	}
	spec, err := decodeSpec(raw)
	if err != nil {
		return err
	}
	spec.Argv, spec.ExitFile, spec.PgidFile, spec.Timeout = argv, "", "", timeout
	probeSpec := filepath.Join(in.dir, "probe-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".json")
	if err := writeSpec(probeSpec, spec); err != nil {
		return err
	}
	defer func() { _ = os.Remove(probeSpec) }()
	var out bytes.Buffer
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"localnode-probe", c.Name}
	cmd.Env = []string{shimEnv + "=" + probeSpec}
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start exec probe: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			return fmt.Errorf("exec probe failed: %w: %s", err, out.String())
		}
		return nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err := <-waited; err == nil {
			return nil
		}
		return fmt.Errorf("exec probe timed out")
	}
}

// httpProbe GETs the probe's URL; the host defaults to the pod's address.
func httpProbe(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction, podIP string) error {
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("http probe request: %w", err)
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like a kubelet, an HTTPS probe does not verify the certificate.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probes don't verify, as a kubelet's
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("http probe: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("http probe: status %d", resp.StatusCode)
	}
	return nil
}

// resolvePort turns a numeric or named port into a number.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("probe names unknown port %q", p.StrVal)
}

// shimStartAllowance is how long a shim may take to start its command
// before an exec probe gives up on it.
const shimStartAllowance = 10 * time.Second

func seconds(v int32, def int) time.Duration {
	if v <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(v) * time.Second
}
