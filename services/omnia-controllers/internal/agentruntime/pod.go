package agentruntime

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// The agent pod has two containers (docs/omnia-controllers.md, "The agent
// pod"): the facade serves sessions on the facade ports and reports their
// activity; the runtime runs the agent and is reached by the facade over
// the pod's loopback.
const (
	// EnvPodName is the facade's variable holding its pod's name.
	EnvPodName = "POD_NAME"
	// FacadeContainerName names the facade container.
	FacadeContainerName = "facade"
	// RuntimePort is where the runtime container listens for the facade.
	RuntimePort = 9000
	// DefaultA2APort is the A2A endpoint's port when spec a2a.port is unset.
	DefaultA2APort = 9999
	// DefaultMCPPort is the MCP server's port when spec mcp.port is unset.
	DefaultMCPPort = 9998
	// DrainPath on the facade's health port returns once the open sessions
	// have ended or the drain timeout has passed; both containers' preStop
	// hooks call it.
	DrainPath = "/drain"
	// DefaultDrainTimeout is facade.drainTimeout when unset.
	DefaultDrainTimeout = 30 * time.Second
	// MaxDrainTimeout caps facade.drainTimeout, as its field documents.
	MaxDrainTimeout = 10 * time.Minute
	// terminationMargin is the grace period beyond the drain: the
	// containers' own shutdown after SIGTERM.
	terminationMargin = 30 * time.Second
)

// FacadeImage picks the facade image: the primary facade's image, else the
// operator's (--facade-image).
func FacadeImage(a *omniav1.AgentRuntime, cfg Config) (string, error) {
	if f := a.Spec.PrimaryFacade(); f != nil && f.Image != "" {
		return f.Image, nil
	}
	if cfg.FacadeImage == "" {
		return "", fmt.Errorf("the operator has no facade image configured (--facade-image) and spec.facades[].image is not set")
	}
	return cfg.FacadeImage, nil
}

// DrainTimeout is the primary facade's drainTimeout, 30 s when unset,
// capped at 10 minutes.
func DrainTimeout(a *omniav1.AgentRuntime) time.Duration {
	d := DefaultDrainTimeout
	if f := a.Spec.PrimaryFacade(); f != nil && f.DrainTimeout != nil {
		d = f.DrainTimeout.Duration
	}
	return min(max(d, 0), MaxDrainTimeout)
}

// terminationGraceSeconds leaves the preStop drain its whole timeout and
// the containers terminationMargin after it: the kubelet kills whatever
// still runs when the grace period ends, preStop hook included
// (https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/).
func terminationGraceSeconds(a *omniav1.AgentRuntime) int64 {
	return int64(math.Ceil((DrainTimeout(a) + terminationMargin).Seconds()))
}

// namedPort is one facade port: its container and Service port name.
type namedPort struct {
	name string
	port int32
}

// facadePorts are the ports the facade container serves, the primary
// facade's ("facade") first, then each other facade under its type's name
// and the a2a and mcp endpoints a facade enables. A port or a name already
// taken is left out: a container or Service cannot list it twice.
func facadePorts(a *omniav1.AgentRuntime) []namedPort {
	var out []namedPort
	names, ports := map[string]bool{}, map[int32]bool{}
	add := func(name string, port int32) {
		if names[name] || ports[port] {
			return
		}
		names[name], ports[port] = true, true
		out = append(out, namedPort{name, port})
	}
	or := func(p *int32, def int32) int32 {
		if p != nil {
			return *p
		}
		return def
	}
	primary := a.Spec.PrimaryFacade()
	add("facade", primaryPort(a))
	for i := range a.Spec.Facades {
		f := &a.Spec.Facades[i]
		if f == primary {
			continue
		}
		def := int32(DefaultFacadePort)
		switch f.Type {
		case omniav1.FacadeTypeA2A:
			def = DefaultA2APort
		case omniav1.FacadeTypeMCP:
			def = DefaultMCPPort
		}
		add(string(f.Type), or(f.Port, def))
	}
	for i := range a.Spec.Facades {
		f := &a.Spec.Facades[i]
		if f.A2A != nil && f.A2A.Enabled {
			add(string(omniav1.FacadeTypeA2A), or(f.A2A.Port, DefaultA2APort))
		}
		if f.MCP != nil && f.MCP.Enabled {
			add(string(omniav1.FacadeTypeMCP), or(f.MCP.Port, DefaultMCPPort))
		}
	}
	return out
}

// drainHook is both containers' preStop: an HTTP GET of the facade's
// /drain, which stops taking sessions and returns once the open ones have
// ended or drainTimeout has passed. An exec hook would need a shell the
// images lack; a sleep hook would always wait the whole timeout. The
// runtime waits on the same drain because the kubelet signals every
// container at once, and the sessions being drained still need it. The
// port is a number: a hook resolves a named port only among its own
// container's ports.
func drainHook() *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: DrainPath, Port: intstr.FromInt32(HealthPort), Scheme: corev1.URISchemeHTTP}}}
}

// containerSecurity is the security context of both containers.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// facadeContainer is the facade container: sessions on the facade ports,
// probes and the drain on the health port, the runtime at
// OMNIA_RUNTIME_ADDR.
func facadeContainer(a *omniav1.AgentRuntime, cfg Config, image string, pull corev1.PullPolicy) corev1.Container {
	primary := a.Spec.PrimaryFacade()
	typ := omniav1.FacadeTypeWebSocket
	if primary != nil {
		typ = primary.Type
	}
	env := []corev1.EnvVar{
		{Name: "OMNIA_AGENT_NAME", Value: a.Name},
		{Name: "OMNIA_NAMESPACE", Value: a.Namespace},
		// The pod's own name keys its entry of status.facadeReports
		// (sessions.go), from the downward API.
		{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "OMNIA_FACADE_TYPE", Value: string(typ)},
		{Name: "OMNIA_FACADE_PORT", Value: fmt.Sprint(primaryPort(a))},
		{Name: "OMNIA_HEALTH_PORT", Value: fmt.Sprint(HealthPort)},
		{Name: "OMNIA_RUNTIME_ADDR", Value: fmt.Sprintf("localhost:%d", RuntimePort)},
		{Name: "OMNIA_DRAIN_TIMEOUT", Value: DrainTimeout(a).String()},
		// Set always, as on the runtime, so a rollout starting does not
		// change (and roll) the stable pods; asCandidate flips it.
		{Name: EnvVariant, Value: VariantStable},
	}
	ports := []corev1.ContainerPort{}
	for _, p := range facadePorts(a) {
		ports = append(ports, corev1.ContainerPort{Name: p.name, ContainerPort: p.port, Protocol: corev1.ProtocolTCP})
		if p.name != "facade" {
			env = append(env, corev1.EnvVar{Name: "OMNIA_" + envName(p.name) + "_PORT", Value: fmt.Sprint(p.port)})
		}
	}
	ports = append(ports, corev1.ContainerPort{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP})
	if primary != nil {
		env = append(env, primary.ExtraEnv...)
	}
	health := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}}
	}
	return corev1.Container{
		Name:            FacadeContainerName,
		Image:           image,
		Command:         cfg.FacadeCommand,
		ImagePullPolicy: pull,
		Env:             env,
		Ports:           ports,
		ReadinessProbe:  &corev1.Probe{ProbeHandler: health("/readyz"), InitialDelaySeconds: 2, PeriodSeconds: 5},
		LivenessProbe:   &corev1.Probe{ProbeHandler: health("/healthz"), InitialDelaySeconds: 5, PeriodSeconds: 10, FailureThreshold: 3},
		Lifecycle:       drainHook(),
		SecurityContext: containerSecurity(),
	}
}
