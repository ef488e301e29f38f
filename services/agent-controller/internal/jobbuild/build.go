// Package jobbuild turns an Agent, its Station and its AgentDefinition into
// the batch/v1 Job that runs it. It is pure: the same inputs always give the
// same Job, which is what makes Job creation idempotent (the name is derived
// from the Agent) and keeps the pod template stable.
package jobbuild

import (
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
)

// The run pod's two emptyDir volumes are mounted at runspec.AgentDir (the
// supervisor bundle and the agent's HOME) and runspec.WorkspaceDir.
const (
	// ExecModel routes a definition to the exec vendor (tool_config.command).
	ExecModel = "exec"
	// TTLSecondsAfterFinished keeps a finished Job (and its pod, log and
	// exit code) for an hour: the window in which the controller reads the
	// result back into status, long enough to survive a restart or backlog.
	TTLSecondsAfterFinished = 3600
	// SafeToEvictAnnotation stops the cluster autoscaler from evicting a
	// running agent mid-task.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// RealtimePort is where a realtime run's supervisor serves prompts.
	RealtimePort = realtime.Port
	// InitContainerName is the run pod's init container, `supervisor init`;
	// the controller reads its log for the conversation restore's outcome.
	InitContainerName = "init"
	// natsVolume mounts the public CA entry of the run's NATS Secret.
	natsVolume = "nats-credentials"
	// secretMode is the mode of the files of the Secrets the controller
	// mounts: owned by root, readable by the fsGroup the run's containers
	// run in (runUser), so by them and no other user. 0400 would leave
	// them readable by root alone wherever the kubelet does not widen the
	// mode for fsGroup.
	secretMode = 0o440
)

// Config is the controller-wide part of every Job.
type Config struct {
	// SupervisorImage is the image of the init container that carries the
	// supervisor bundle.
	SupervisorImage string
	// SupervisorPath is the supervisor binary inside that image; the init
	// container runs "<path> init", which copies the bundle to
	// runspec.SupervisorBinary.
	SupervisorPath string
	// NATSURL, when set, is where run pods publish their events
	// (runspec.EnvNATSURL); empty leaves NATS out of the run.
	NATSURL string
	// PodSecurityLevel is the Pod Security Standards level the run pod must
	// meet (podsecurity.go); empty is PodSecurityRestricted.
	PodSecurityLevel PodSecurityLevel
	// NATSCredentials gives the run its own NATS credential: the Secret
	// runspec.NATSSecretName(uid), which the controller creates before the
	// Job, reaches the supervisor's containers as AGENT_NATS_CREDS through
	// secretKeyRef, never as a file the CLI could read. Only with NATSURL.
	NATSCredentials bool
	// NATSCA says the credential Secret also holds the CA that verifies
	// the NATS server: that entry alone, public, is mounted at
	// runspec.NATSMountDir (AGENT_NATS_CA_FILE).
	NATSCA bool
}

// RunCredentials reports whether each run gets its own NATS credential
// Secret, which must exist before its Job.
func (c Config) RunCredentials() bool { return c.NATSURL != "" && c.NATSCredentials }

// Input is everything one Job is built from.
type Input struct {
	Agent      *agentsv1alpha1.Agent
	Station    *agentsv1alpha1.Station
	Definition *agentsv1alpha1.AgentDefinition
	// Model is the run's effective model (Agent, then definition, then the default).
	Model  string
	Config Config
}

// ErrInvalidTemplate wraps every refusal of a Station's pod template, so the
// reason recorded on the Agent names the Station field at fault.
var ErrInvalidTemplate = errors.New("invalid Station template")

// Build returns the Job for in, or an error naming what is wrong with the
// Station or AgentDefinition.
func Build(in Input) (*batchv1.Job, error) {
	if in.Agent == nil || in.Station == nil || in.Definition == nil {
		return nil, errors.New("build Job: Agent, Station and AgentDefinition are all required")
	}
	tmpl := in.Station.Spec.Template.DeepCopy()
	if err := validateTemplate(in.Station.Name, tmpl); err != nil {
		return nil, err
	}
	spec, err := runSpec(in)
	if err != nil {
		return nil, fmt.Errorf("AgentDefinition %s: %w", in.Definition.Name, err)
	}
	env := runEnv(in, spec)
	execution := in.Definition.Spec.EffectiveExecution()

	labels := map[string]string{
		agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob,
		agentsv1alpha1.LabelAgent:     SafeName(in.Agent.Name),
		agentsv1alpha1.LabelStation:   SafeName(in.Station.Name),
	}
	if execution == agentsv1alpha1.ExecutionRealtime {
		labels[agentsv1alpha1.LabelExecution] = string(agentsv1alpha1.ExecutionRealtime)
	}
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	for k, v := range labels {
		tmpl.Labels[k] = v
	}
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[SafeToEvictAnnotation] = "false"

	ps := &tmpl.Spec
	ps.RestartPolicy = corev1.RestartPolicyNever
	ps.SecurityContext = podSecurityContext(ps.SecurityContext)
	ps.AutomountServiceAccountToken = ptr.To(false)

	var volumes []corev1.Volume
	for _, v := range ps.Volumes {
		if v.Name != "agent" && v.Name != "workspace" && v.Name != natsVolume {
			volumes = append(volumes, v)
		}
	}
	volumes = append(volumes,
		corev1.Volume{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	ps.Volumes = volumes
	mounts := []corev1.VolumeMount{{Name: "agent", MountPath: runspec.AgentDir}, {Name: "workspace", MountPath: runspec.WorkspaceDir}}
	if in.Config.RunCredentials() && in.Config.NATSCA {
		// Only the public CA is a file; the credential is in runEnv.
		ps.Volumes = append(ps.Volumes, natsCAVolume(in))
		mounts = append(mounts, corev1.VolumeMount{Name: natsVolume, MountPath: runspec.NATSMountDir, ReadOnly: true})
	}

	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.Name != agentsv1alpha1.AgentContainerName {
			// A sidecar never mounts the run's Secret, even by naming
			// its volume.
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == natsVolume })
			continue
		}
		c.Command = []string{runspec.SupervisorBinary, runspec.CommandRun}
		c.Args = nil
		c.Env = env
		if execution == agentsv1alpha1.ExecutionRealtime {
			// The run's token comes from a Secret owned by the Agent, so
			// it is in neither the Job nor the Pod spec; only the session
			// server, in this container, needs it.
			c.Env = append(slices.Clone(env), secretEnv(realtime.EnvToken, realtime.TokenSecretName(string(in.Agent.UID)), realtime.TokenSecretKey))
		}
		c.EnvFrom = nil
		var keep []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if m.Name != "agent" && m.Name != "workspace" && m.Name != natsVolume {
				keep = append(keep, m)
			}
		}
		keep = append(keep, mounts...)
		c.VolumeMounts = keep
		c.SecurityContext = runSecurityContext()
		if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
			c.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			}
		}
		if execution == agentsv1alpha1.ExecutionRealtime {
			if !hasPort(c, RealtimePort) {
				c.Ports = append(c.Ports, corev1.ContainerPort{Name: realtime.PortName, ContainerPort: RealtimePort, Protocol: corev1.ProtocolTCP})
			}
		}
	}
	ps.InitContainers = []corev1.Container{{
		Name:            InitContainerName,
		Image:           in.Config.SupervisorImage,
		Command:         []string{in.Config.SupervisorPath, runspec.CommandInit},
		Env:             env,
		VolumeMounts:    mounts,
		SecurityContext: runSecurityContext(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
	}}
	if err := securePod(in.Station.Name, &in.Station.Spec.Template, tmpl, in.Config.PodSecurityLevel); err != nil {
		return nil, err
	}

	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      JobName(in.Agent.Name),
			Namespace: in.Agent.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         agentsv1alpha1.GroupVersion.String(),
				Kind:               "Agent",
				Name:               in.Agent.Name,
				UID:                in.Agent.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](TTLSecondsAfterFinished),
			ActiveDeadlineSeconds:   ptr.To(in.Station.Spec.DeadlineSeconds()),
			BackoffLimit:            ptr.To[int32](0),
			Template:                *tmpl,
		},
	}, nil
}

// natsCAVolume is the CA entry, and only that entry, of the run's NATS
// Secret: the credential beside it must never be a file in the run's
// containers, where the CLI (same uid) could read it.
func natsCAVolume(in Input) corev1.Volume {
	return corev1.Volume{Name: natsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: runspec.NATSSecretName(string(in.Agent.UID)), Items: []corev1.KeyToPath{{Key: runspec.NATSCAKey, Path: runspec.NATSCAKey}},
		DefaultMode: ptr.To[int32](secretMode),
	}}}
}

func hasPort(c *corev1.Container, port int32) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return true
		}
	}
	return false
}

// validateTemplate refuses templates without the agent container. What
// would let an agent escape its pod (host namespaces, hostPath volumes,
// privileged containers and the rest of the Pod Security Standards) is
// refused by securePod on the Job's pod.
func validateTemplate(station string, t *corev1.PodTemplateSpec) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: Station %s: %s", ErrInvalidTemplate, station, fmt.Sprintf(format, args...))
	}
	if len(t.Spec.Containers) == 0 {
		return fail("spec.template.spec.containers is empty; it needs a container named %q", agentsv1alpha1.AgentContainerName)
	}
	found := false
	for _, c := range t.Spec.Containers {
		if c.Name == agentsv1alpha1.AgentContainerName {
			found = true
		}
	}
	if !found {
		return fail("spec.template.spec.containers has no container named %q", agentsv1alpha1.AgentContainerName)
	}
	return nil
}
