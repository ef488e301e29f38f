package jobbuild

import (
	"errors"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// sidecar returns the input template's sidecar, for a case to arm.
func sidecar(t *corev1.PodTemplateSpec) *corev1.Container { return &t.Spec.Containers[1] }

func sidecarSC(t *corev1.PodTemplateSpec) *corev1.SecurityContext {
	c := sidecar(t)
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	return c.SecurityContext
}

// TestPodSecurityRules attacks the run pod through its Station's template,
// one rule a case: each attack must fail the build with an error naming the
// field, both through Build and through securePod alone (so a rule holds
// even where another check of Build would have caught it first); each
// allowed case must build.
func TestPodSecurityRules(t *testing.T) {
	cases := []struct {
		rule   string
		level  PodSecurityLevel
		attack func(*corev1.PodTemplateSpec)
		// want are substrings of the refusal; none means the pod is admitted.
		want []string
	}{
		{"sidecar runs as root", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).RunAsUser = ptr.To[int64](0)
		}, []string{`container "sidecar" must not set runAsUser=0`}},
		{"sidecar turns runAsNonRoot off", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).RunAsNonRoot = ptr.To(false)
		}, []string{`container "sidecar" must not set securityContext.runAsNonRoot=false`}},
		{"pod turns runAsNonRoot off", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}
		}, []string{`pod must not set securityContext.runAsNonRoot=false`}},
		{"sidecar allows privilege escalation", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).AllowPrivilegeEscalation = ptr.To(true)
		}, []string{`container "sidecar" must set securityContext.allowPrivilegeEscalation=false`}},
		{"added capability NET_ADMIN", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
		}, []string{`container "sidecar" must not include "NET_ADMIN" in securityContext.capabilities.add`}},
		{"added capability NET_ADMIN at baseline", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
		}, []string{`non-default capabilities (container "sidecar" must not include "NET_ADMIN"`}},
		{"seccomp Unconfined", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, []string{`container "sidecar" must not set securityContext.seccompProfile.type to "Unconfined"`}},
		{"seccomp Unconfined for the pod at baseline", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, []string{`pod must not set securityContext.seccompProfile.type to "Unconfined"`}},
		{"AppArmor unconfined", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, []string{`container "sidecar" must not set AppArmor profile type to "Unconfined"`}},
		{"AppArmor unconfined by annotation", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "sidecar": "unconfined"}
		}, []string{`forbidden AppArmor profile`, `container.apparmor.security.beta.kubernetes.io/sidecar="unconfined"`}},
		{"hostPath", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, []string{`hostPath volumes (volume "root")`}},
		{"hostPath at restricted", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, []string{`volume "root" uses restricted volume type "hostPath"`}},
		{"hostNetwork", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true }, []string{"host namespaces (hostNetwork=true)"}},
		{"hostPID", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { p.Spec.HostPID = true }, []string{"host namespaces (hostPID=true)"}},
		{"hostIPC", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { p.Spec.HostIPC = true }, []string{"host namespaces (hostIPC=true)"}},
		{"hostPort", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			sidecar(p).Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}, []string{`hostPort (container "sidecar" uses hostPort 8080)`}},
		{"shareProcessNamespace", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { p.Spec.ShareProcessNamespace = ptr.To(true) },
			[]string{"spec.template.spec.shareProcessNamespace must not be true"}},
		{"projected SA token", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
		}, []string{"spec.template.spec.volumes[kube-api].projected.sources[].serviceAccountToken must not be set"}},
		{"automountServiceAccountToken true", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { p.Spec.AutomountServiceAccountToken = ptr.To(true) },
			[]string{"spec.template.spec.automountServiceAccountToken must not be true"}},
		{"privileged init container", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			p.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, []string{`privileged (container "station-init" must not set securityContext.privileged=true)`}},
		{"privileged sidecar", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { sidecarSC(p).Privileged = ptr.To(true) },
			[]string{`privileged (container "sidecar" must not set securityContext.privileged=true)`}},
		{"init container runs as root at restricted", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			p.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
		}, []string{`container "station-init" must not set runAsUser=0`}},
		{"a volume type that reaches outside the pod at restricted", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}})
		}, []string{`volume "share" uses restricted volume type "nfs"`}},
		{"an unsafe sysctl", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
		}, []string{"forbidden sysctls (kernel.msgmax)"}},
		{"baseline level admits runAsUser 0", PodSecurityBaseline, func(p *corev1.PodTemplateSpec) { sidecarSC(p).RunAsUser = ptr.To[int64](0) }, nil},
		{"but restricted refuses runAsUser 0", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) { sidecarSC(p).RunAsUser = ptr.To[int64](0) },
			[]string{`PodSecurity "restricted:latest"`, `runAsUser=0`}},
		{"restricted admits NET_BIND_SERVICE", PodSecurityRestricted, func(p *corev1.PodTemplateSpec) {
			sidecarSC(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}
		}, nil},
		{"an empty level is restricted", "", func(p *corev1.PodTemplateSpec) { sidecarSC(p).RunAsUser = ptr.To[int64](0) },
			[]string{`PodSecurity "restricted:latest"`}},
		{"defaults filled when unset", PodSecurityRestricted, func(*corev1.PodTemplateSpec) {}, nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			in := input()
			in.Config.PodSecurityLevel = c.level
			c.attack(&in.Station.Spec.Template)
			_, err := Build(in)
			// securePod alone, on the template with the pod security
			// context Build gives it.
			pod := in.Station.Spec.Template.DeepCopy()
			pod.Spec.SecurityContext = podSecurityContext(pod.Spec.SecurityContext)
			alone := securePod("st", &in.Station.Spec.Template, pod, c.level)
			if len(c.want) == 0 {
				if err != nil || alone != nil {
					t.Fatalf("refused: Build %v; securePod %v", err, alone)
				}
				return
			}
			for what, err := range map[string]error{"Build": err, "securePod": alone} {
				if !errors.Is(err, ErrInvalidTemplate) {
					t.Fatalf("%s admitted the attack or failed otherwise: %v", what, err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not name %q", what, err, w)
					}
				}
			}
		})
	}
}

// TestRestrictedDefaults: what the template leaves unset, the Job sets to
// restricted's values; what it sets is kept, so the refusals above see it.
func TestRestrictedDefaults(t *testing.T) {
	in := input()
	sidecarSC(&in.Station.Spec.Template).Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}
	in.Station.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{4000}, FSGroup: ptr.To[int64](5)}
	j, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	ps := j.Spec.Template.Spec
	side := ps.Containers[1].SecurityContext
	init := ps.InitContainers[0].SecurityContext
	cases := []struct {
		rule string
		ok   bool
	}{
		{"the pod runs as non-root", ptr.Deref(ps.SecurityContext.RunAsNonRoot, false)},
		{"the pod's seccomp profile is RuntimeDefault", ps.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"the pod's fsGroup is the agent's group whatever the template says", *ps.SecurityContext.FSGroup == 1000},
		{"the template's other pod settings are kept", slices.Equal(ps.SecurityContext.SupplementalGroups, []int64{4000})},
		{"a sidecar gets no privilege escalation", side != nil && side.AllowPrivilegeEscalation != nil && !*side.AllowPrivilegeEscalation},
		{"a sidecar drops every capability, keeping its own drops", side != nil && slices.Equal(side.Capabilities.Drop, []corev1.Capability{"NET_RAW", "ALL"})},
		{"the sidecar's user is left to its image", side.RunAsUser == nil},
		{"the init step runs as the agent's user, not root", ptr.Deref(init.RunAsUser, 0) == 1000 && ptr.Deref(init.RunAsGroup, 0) == 1000 && ptr.Deref(init.RunAsNonRoot, false)},
		{"the init step adds no capability", len(init.Capabilities.Add) == 0 && slices.Equal(init.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"the init step cannot escalate", !ptr.Deref(init.AllowPrivilegeEscalation, true)},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.ok {
				t.Errorf("rule broken; pod security context %+v, sidecar %+v, init %+v", ps.SecurityContext, side, init)
			}
		})
	}
	t.Run("baseline fills in none of restricted's container defaults", func(t *testing.T) {
		in := input()
		in.Config.PodSecurityLevel = PodSecurityBaseline
		j, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		if sc := j.Spec.Template.Spec.Containers[1].SecurityContext; sc != nil {
			t.Errorf("the sidecar's security context was changed at baseline: %+v", sc)
		}
		if j.Spec.Template.Spec.SecurityContext.RunAsNonRoot != nil {
			t.Error("runAsNonRoot was set for the pod at baseline, which would stop a root sidecar from starting")
		}
	})
}

// TestTheControllersOwnContainersMeetRestricted evaluates the Jobs the
// controller builds from a template with only the agent container, job
// and realtime, with Kubernetes' evaluator directly: a namespace enforcing
// restricted admits them.
func TestTheControllersOwnContainersMeetRestricted(t *testing.T) {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, execution := range []agentsv1alpha1.ExecutionMode{agentsv1alpha1.ExecutionJob, agentsv1alpha1.ExecutionRealtime} {
		for _, level := range []PodSecurityLevel{PodSecurityRestricted, PodSecurityBaseline} {
			t.Run(string(execution)+" at "+string(level), func(t *testing.T) {
				in := input()
				in.Config.PodSecurityLevel = level
				in.Station.Spec.Template.Spec.Containers = in.Station.Spec.Template.Spec.Containers[:1]
				in.Station.Spec.Template.Spec.InitContainers = nil
				in.Definition.Spec.Execution = execution
				if execution == agentsv1alpha1.ExecutionRealtime {
					in.Model = ExecModel
					in.Definition.Spec.ToolConfig = &apiextensionsv1.JSON{Raw: []byte(`{"command":["true"]}`)}
				}
				j, err := Build(in)
				if err != nil {
					t.Fatal(err)
				}
				restricted(t, ev, j)
			})
		}
	}
}

func restricted(t *testing.T, ev policy.Evaluator, j *batchv1.Job) {
	t.Helper()
	lv := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &j.Spec.Template.ObjectMeta, &j.Spec.Template.Spec))
	if !res.Allowed {
		t.Errorf("the controller's run pod breaks restricted: %s", res.ForbiddenDetail())
	}
}

func TestParsePodSecurityLevel(t *testing.T) {
	cases := []struct {
		rule string
		in   string
		ok   bool
	}{
		{"restricted is a level", "restricted", true},
		{"baseline is a level", "baseline", true},
		{"privileged is refused: a run pod never reaches its node", "privileged", false},
		{"an empty level is refused on the command line", "", false},
		{"levels are lower case, as Kubernetes spells them", "Restricted", false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			l, err := ParsePodSecurityLevel(c.in)
			if (err == nil) != c.ok || c.ok && string(l) != c.in {
				t.Fatalf("ParsePodSecurityLevel(%q) = %q, %v", c.in, l, err)
			}
		})
	}
}
