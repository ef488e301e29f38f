package agentruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
)

// Config is the operator-wide part of what the controller builds.
type Config struct {
	// RuntimeImage is the runtime container image of promptkit agents
	// (spec.framework.image overrides it).
	RuntimeImage string
	// RuntimeCommand overrides the image's entrypoint when not empty.
	RuntimeCommand []string
	// ImagePullPolicy of the runtime and facade containers; IfNotPresent
	// when empty.
	ImagePullPolicy corev1.PullPolicy
	// PrometheusURL is the Prometheus the default KEDA trigger queries
	// (--prometheus-url); without it a keda policy needs its own triggers.
	PrometheusURL string
	// FacadeImage is the facade container image (the primary facade's
	// image overrides it).
	FacadeImage string
	// FacadeCommand overrides the facade image's entrypoint when not empty.
	FacadeCommand []string
	// ActivatorAddress is the IP address of the activator (this
	// process's pod, --activator-address): a reaped agent's Service is
	// routed there so its next session wakes it (activator.go). Empty:
	// a reaped agent's Service keeps its selector and only the wake
	// annotation wakes it.
	ActivatorAddress string
	// ActivatorPort is the activator's port (--activator-port).
	ActivatorPort int32
}

// Label keys and values of the objects the controller builds.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// AgentAppName is the LabelName value of every agent object.
	AgentAppName = "omnia-agent"
	// ManagedBy is the LabelManagedBy value of every agent object.
	ManagedBy = "omnia-controllers"
	// AnnotationAppliedHash on a built object is the hash of the desired
	// state last written, so an unchanged desired state costs no write.
	AnnotationAppliedHash = "omnia.altairalabs.ai/applied-hash"
)

// Ports and paths of the agent pod: the primary facade's default port and
// the facade's health port (pod.go), and where the pack is mounted.
const (
	DefaultFacadePort = 8080
	HealthPort        = 8081
	PackMountPath     = "/etc/omnia/pack"
	PackPath          = PackMountPath + "/" + omniav1.PackJSONKey
	containerName     = "runtime"
)

// SelectorLabels are the immutable Deployment selector of an agent.
func SelectorLabels(name string) map[string]string {
	return map[string]string{
		LabelName: AgentAppName, LabelInstance: name, LabelManagedBy: ManagedBy,
		omniav1.LabelComponent: omniav1.ComponentAgent, omniav1.LabelTrack: omniav1.TrackStable,
	}
}

// objectLabels label the Deployment, Service and HPA; the track is left
// out so the Service would front a candidate too.
func objectLabels(name string) map[string]string {
	l := SelectorLabels(name)
	delete(l, omniav1.LabelTrack)
	return l
}

// RuntimeImage picks the runtime image: spec.framework.image, else the
// operator's image for promptkit; other frameworks must name an image.
func RuntimeImage(a *omniav1.AgentRuntime, cfg Config) (string, error) {
	f := a.Spec.Framework
	if f != nil && f.Image != "" {
		return f.Image, nil
	}
	if f != nil && f.Type != "" && f.Type != omniav1.FrameworkPromptKit {
		return "", fmt.Errorf("framework %s needs spec.framework.image", f.Type)
	}
	if cfg.RuntimeImage == "" {
		return "", fmt.Errorf("the operator has no runtime image configured")
	}
	return cfg.RuntimeImage, nil
}

// ConfigHash digests every input of the pod that is not already spelled
// out in the template: the pack's content, the skills' content, the tools
// file's content, the providers' settings and their credential Secrets'
// data. Only a hash of Secret data is kept, never a value. The policies
// in force are in the template's env already; they are hashed too so that
// the annotation alone tells every change of what the runtime was given.
func ConfigHash(in Inputs, res Resolution) string {
	h := sha256.New()
	w := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	if p := res.Pack; p != nil {
		w("pack", p.Name, p.Spec.Version, p.Status.ContentDigest)
		if p.IsLive() {
			w(p.Spec.Source.Live.URL)
		}
	}
	// The skills mounted and their sources' content, nothing when none
	// is, so an agent without skills keeps its hash (skills.go).
	if ss := res.Skills; ss.mounted() {
		w("skills", ss.Digest)
	}
	// The tool set's content, not the registry's generation: a registry
	// edit that leaves the tools as they were rolls nothing (tools.go).
	if ts := res.Tools; ts != nil {
		w("tools", ts.Digest)
	} else if tr := res.Registry; tr != nil {
		w("registry", tr.Name)
	}
	provs := append([]ResolvedProvider(nil), res.Providers...)
	sort.Slice(provs, func(i, j int) bool { return provs[i].Ref.Name < provs[j].Ref.Name })
	for _, rp := range provs {
		s := rp.Provider.Spec
		settings, _ := json.Marshal(struct {
			Defaults *omniav1.ProviderDefaults
			Pricing  *omniav1.ProviderPricing
			Headers  map[string]string
			Platform *omniav1.ProviderPlatform
		}{s.Defaults, s.Pricing, s.Headers, s.Platform})
		w("provider", rp.Ref.Name, rp.Provider.Name, string(s.Type), string(s.EffectiveRole()), s.Model, s.BaseURL, string(settings))
		if c := s.Credential; c != nil && c.SecretRef != nil {
			w("secret", c.SecretRef.Name, secretDigest(in.Secrets[c.SecretRef.Name]))
		}
		if a := s.Auth; a != nil && a.CredentialsSecretRef != nil {
			w("auth secret", a.CredentialsSecretRef.Name, secretDigest(in.Secrets[a.CredentialsSecretRef.Name]))
		}
	}
	for _, e := range policyEnv(in) {
		w("policy", e.Name, e.Value)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func secretDigest(s *corev1.Secret) string {
	if s == nil {
		return "missing"
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(s.Data[k])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// providerEnv is what the runtime learns of one provider; the API key is
// referenced from its Secret, never copied.
type providerEnv struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Type     string `json:"type"`
	Role     string `json:"role"`
	Model    string `json:"model,omitempty"`
	BaseURL  string `json:"baseURL,omitempty"`
	KeyEnv   string `json:"keyEnv,omitempty"`
	providerSettings
}

// envName turns a logical provider name into an environment variable
// fragment ("my-llm" → "MY_LLM").
func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// BuildDeployment returns the desired Deployment. replicas is nil when an
// autoscaler owns the count. The error is a spec problem (the agent's
// volumes, see podVolumes): a retry builds the same, so it waits for an
// edit.
func BuildDeployment(in Inputs, res Resolution, cfg Config, image string) (*appsv1.Deployment, error) {
	a := in.Agent
	pack := res.Pack
	env := []corev1.EnvVar{
		{Name: "OMNIA_AGENT_NAME", Value: a.Name},
		{Name: "OMNIA_NAMESPACE", Value: a.Namespace},
		{Name: "OMNIA_MODE", Value: string(a.Spec.EffectiveMode())},
		{Name: "OMNIA_RUNTIME_PORT", Value: fmt.Sprint(RuntimePort)},
		{Name: "OMNIA_PROMPTPACK_NAME", Value: pack.Spec.PackName},
		{Name: "OMNIA_PROMPTPACK_VERSION", Value: pack.Spec.Version},
		// Set always, not only during a rollout, so a rollout starting
		// does not change (and roll) the stable pods.
		{Name: EnvVariant, Value: VariantStable},
	}
	if w := in.Workspace; w != nil {
		env = append(env, corev1.EnvVar{Name: "OMNIA_WORKSPACE_NAME", Value: w.Name})
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if pack.IsLive() {
		env = append(env, corev1.EnvVar{Name: "OMNIA_PROMPTPACK_URL", Value: pack.Spec.Source.Live.URL})
	} else {
		env = append(env, corev1.EnvVar{Name: "OMNIA_PROMPTPACK_PATH", Value: PackPath})
		volumes = append(volumes, corev1.Volume{Name: PackVolumeName, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: pack.Spec.Source.ConfigMapRef.Name}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: PackVolumeName, MountPath: PackMountPath, ReadOnly: true})
	}
	if ss := res.Skills; ss.mounted() {
		env = append(env, corev1.EnvVar{Name: EnvSkillsPath, Value: SkillsMountPath})
		volumes = append(volumes, ss.volume())
		mounts = append(mounts, corev1.VolumeMount{Name: SkillsVolumeName, MountPath: SkillsMountPath, ReadOnly: true})
	}
	if ts := res.Tools; ts != nil {
		env = append(env, corev1.EnvVar{Name: EnvToolsPath, Value: ToolsPath})
		volumes = append(volumes, ts.volume(a.Name))
		mounts = append(mounts, corev1.VolumeMount{Name: ToolsVolumeName, MountPath: ToolsMountPath, ReadOnly: true})
	}
	// The volumes the agent's mounts name go into the pod with them: a
	// mount without its volume is refused by the API server.
	volumes, err := podVolumes(a, volumes)
	if err != nil {
		return nil, err
	}
	if res.Registry != nil {
		env = append(env, corev1.EnvVar{Name: "OMNIA_TOOLREGISTRY", Value: res.Registry.Name})
	}
	env = append(env, contextEnv(a)...)
	env = append(env, policyEnv(in)...)
	var provs []providerEnv
	for _, rp := range res.Providers {
		s := rp.Provider.Spec
		pe := providerEnv{Name: rp.Ref.Name, Provider: rp.Provider.Name, Type: string(s.Type), Role: string(s.EffectiveRole()), Model: s.Model, BaseURL: s.BaseURL}
		if c := s.Credential; c != nil && c.SecretRef != nil {
			// The Secret may be gone while the Provider still reads Ready
			// (its controller has not seen the deletion yet): then it has
			// no key to reference, like a Secret without the key, and the
			// config hash ("missing") rolls the pods when it returns.
			if sec := in.Secrets[c.SecretRef.Name]; sec != nil {
				if key, _, ok := provider.CredentialValue(&s, sec); ok {
					pe.KeyEnv = "OMNIA_PROVIDER_" + envName(rp.Ref.Name) + "_API_KEY"
					env = append(env, corev1.EnvVar{Name: pe.KeyEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: c.SecretRef.Name}, Key: key}}})
				}
			}
		} else if c != nil && c.EnvVar != "" {
			pe.KeyEnv = c.EnvVar
		}
		var authEnv []corev1.EnvVar
		pe.providerSettings, authEnv = providerSettingsOf(rp.Ref.Name, &s)
		env = append(env, authEnv...)
		provs = append(provs, pe)
	}
	if provs != nil {
		b, _ := json.Marshal(provs)
		env = append(env, corev1.EnvVar{Name: "OMNIA_PROVIDERS", Value: string(b)})
	}
	if a.Annotations[omniav1.AnnotationMockProvider] == "true" {
		env = append(env, corev1.EnvVar{Name: "OMNIA_MOCK_PROVIDER", Value: "true"})
	}
	if rt := a.Spec.Runtime; rt != nil {
		env = append(env, rt.ExtraEnv...)
		mounts = append(mounts, rt.VolumeMounts...)
	}
	if po := a.Spec.PodOverrides; po != nil {
		env = append(env, po.ExtraEnv...)
		mounts = append(mounts, po.ExtraVolumeMounts...)
	}

	// The Workspace's pod defaults are layered under the agent's own
	// settings: whatever the agent sets on the same key wins.
	wsRuntime := workspaceRuntime(in)
	podAnn := scrapeAnnotations()
	if wsRuntime != nil {
		maps.Copy(podAnn, wsRuntime.PodAnnotations)
	}
	podAnn[omniav1.AnnotationConfigHash] = ConfigHash(in, res)
	for k, v := range a.Spec.ExtraPodAnnotations {
		podAnn[k] = v
	}
	podLabels := SelectorLabels(a.Name)
	podLabels[omniav1.LabelMode] = string(a.Spec.EffectiveMode())
	reserved := maps.Clone(podLabels) // the selector and mode are the operator's
	if wsRuntime != nil {
		for k, v := range wsRuntime.PodLabels {
			if _, r := reserved[k]; !r {
				podLabels[k] = v
			}
		}
	}
	pull := cfg.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	c := corev1.Container{
		Name:            containerName,
		Image:           image,
		Command:         cfg.RuntimeCommand,
		ImagePullPolicy: pull,
		Env:             env,
		Ports: []corev1.ContainerPort{
			{Name: "runtime", ContainerPort: RuntimePort, Protocol: corev1.ProtocolTCP},
		},
		// A TCP probe: the runtime's protocol is the facade's business.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("runtime")}},
			InitialDelaySeconds: 2, PeriodSeconds: 5},
		Lifecycle:       drainHook(),
		VolumeMounts:    mounts,
		SecurityContext: containerSecurity(),
	}
	facadeImage, err := FacadeImage(a, cfg)
	if err != nil {
		return nil, err
	}
	// The runtime stays Containers[0]: the settings below that name one
	// container are the runtime's.
	pod := corev1.PodSpec{
		Containers:                    []corev1.Container{c, facadeContainer(a, cfg, facadeImage, pull)},
		TerminationGracePeriodSeconds: ptr(terminationGraceSeconds(a)),
		ServiceAccountName:            podServiceAccount(in),
		Volumes:                       volumes,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)),
			FSGroup: ptr(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
	if rt := a.Spec.Runtime; rt != nil {
		if rt.Resources != nil {
			pod.Containers[0].Resources = *rt.Resources
		}
		pod.NodeSelector, pod.Tolerations, pod.Affinity = rt.NodeSelector, rt.Tolerations, rt.Affinity
	}
	if po := a.Spec.PodOverrides; po != nil {
		pod.PriorityClassName = po.PriorityClassName
		pod.ImagePullSecrets = po.ImagePullSecrets
		pod.Containers[0].EnvFrom = po.ExtraEnvFrom
		if po.NodeSelector != nil {
			pod.NodeSelector = po.NodeSelector
		}
		pod.Tolerations = append(pod.Tolerations, po.Tolerations...)
		for k, v := range po.Labels {
			if _, r := reserved[k]; !r {
				podLabels[k] = v
			}
		}
		for k, v := range po.Annotations {
			podAnn[k] = v
		}
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: desiredReplicas(in),
			Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(a.Name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnn}, Spec: pod},
		},
	}
	return d, nil
}

// autoscaled reports whether an autoscaler owns the replica count, under
// the agent's effective policy (EffectiveAutoscaling).
func autoscaled(in Inputs) bool {
	as := EffectiveAutoscaling(in)
	return as != nil && as.Enabled
}

func desiredReplicas(in Inputs) *int32 {
	if autoscaled(in) {
		return nil
	}
	a := in.Agent
	if rt := a.Spec.Runtime; rt != nil && rt.Replicas != nil {
		return ptr(*rt.Replicas)
	}
	return ptr(int32(1))
}

func primaryPort(a *omniav1.AgentRuntime) int32 {
	if f := a.Spec.PrimaryFacade(); f != nil && f.Port != nil {
		return *f.Port
	}
	return DefaultFacadePort
}

// scrapeAnnotations are the prometheus.io annotations a Prometheus with
// the usual kubernetes_sd pod relabelling reads to scrape the facade's
// /metrics on the health port, where omnia_agent_connections_active (the
// KEDA default trigger's series, keda.go) comes from. They come first in
// the pod's annotations, so a Workspace, spec.extraPodAnnotations or
// podOverrides may replace them (for example prometheus.io/scrape=false).
func scrapeAnnotations() map[string]string {
	return map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   fmt.Sprint(HealthPort),
		"prometheus.io/path":   "/metrics",
	}
}

// BuildService returns the desired Service: the facade container's ports
// (facadePorts), the primary facade first.
func BuildService(a *omniav1.AgentRuntime) *corev1.Service {
	var ports []corev1.ServicePort
	for _, p := range facadePorts(a) {
		ports = append(ports, corev1.ServicePort{Name: p.name, Port: p.port, TargetPort: intstr.FromInt32(p.port),
			Protocol: corev1.ProtocolTCP, AppProtocol: ptr("http")})
	}
	sel := SelectorLabels(a.Name)
	delete(sel, omniav1.LabelTrack)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: sel, Ports: ports},
	}
}

// BuildHPA returns the desired HorizontalPodAutoscaler, or nil when the
// agent is not autoscaled by an HPA. Memory is the primary metric (a
// session holds memory while it waits on the model), CPU a safety valve.
// The policy is the agent's effective one: its own, else its Workspace
// service group's.
func BuildHPA(in Inputs) *autoscalingv2.HorizontalPodAutoscaler {
	if !autoscaled(in) {
		return nil
	}
	a := in.Agent
	as := EffectiveAutoscaling(in)
	if as.Type != "" && as.Type != omniav1.AutoscalerHPA {
		return nil
	}
	or := func(p *int32, def int32) int32 {
		if p != nil {
			return *p
		}
		return def
	}
	minR := or(as.MinReplicas, 1)
	if minR < 1 {
		minR = 1 // an HPA cannot scale to zero
	}
	metric := func(res corev1.ResourceName, pct int32) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: res, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(pct)}}}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: a.Name},
			MinReplicas:    ptr(minR),
			MaxReplicas:    or(as.MaxReplicas, 100),
			Metrics: []autoscalingv2.MetricSpec{
				metric(corev1.ResourceMemory, or(as.TargetMemoryUtilizationPercentage, 70)),
				metric(corev1.ResourceCPU, or(as.TargetCPUUtilizationPercentage, 90)),
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(or(as.ScaleDownStabilizationSeconds, 300)),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}}},
			},
		},
	}
}

// AppliedHash digests a desired object for AnnotationAppliedHash.
func AppliedHash(obj any) string {
	b, _ := json.Marshal(obj)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

func ptr[T any](v T) *T { return &v }
