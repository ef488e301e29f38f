package jobbuild

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// The run pod is held to a Pod Security Standards level
// (docs/agent-controller.md, "Pod security"): restricted unless the
// controller runs with --pod-security-level=baseline. The Job is checked
// when it is built, with Kubernetes' own evaluator (k8s.io/pod-security-admission)
// on the pod spec that will run, so a namespace that enforces the same
// level never refuses a pod the controller let through; admission's CEL
// rules on the Station (libs/api) refuse the worst of it earlier.

// PodSecurityLevel is the Pod Security Standards level every run pod must meet.
type PodSecurityLevel string

const (
	// PodSecurityRestricted is the default: non-root, no privilege
	// escalation, every capability dropped, a RuntimeDefault or Localhost
	// seccomp profile, and only the volume types that cannot reach the node.
	PodSecurityRestricted PodSecurityLevel = "restricted"
	// PodSecurityBaseline relaxes restricted for sidecars that need root or
	// a default capability; host namespaces, hostPath, host ports,
	// privileged containers and unconfined profiles stay refused.
	PodSecurityBaseline PodSecurityLevel = "baseline"
)

// ParsePodSecurityLevel reads a --pod-security-level value; "privileged"
// is refused on purpose, since a run pod must never reach its node.
func ParsePodSecurityLevel(s string) (PodSecurityLevel, error) {
	switch l := PodSecurityLevel(s); l {
	case PodSecurityRestricted, PodSecurityBaseline:
		return l, nil
	}
	return "", fmt.Errorf("pod security level %q is neither %q nor %q", s, PodSecurityRestricted, PodSecurityBaseline)
}

// effective is the level a Config asks for; the zero value is restricted,
// so a caller that says nothing gets the strict default.
func (l PodSecurityLevel) effective() PodSecurityLevel {
	if l == PodSecurityBaseline {
		return PodSecurityBaseline
	}
	return PodSecurityRestricted
}

// runUser is the uid and gid of the controller's own containers: the
// agent's user, which the run's volumes belong to (fsGroup).
const runUser = 1000

// evaluator is built once: DefaultChecks is a fixed list, so its error can
// only be a broken library, reported on every Build rather than panicking.
var evaluator = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// runSecurityContext is the security context of the containers the
// controller injects (the supervisor's init step and the agent): they meet
// restricted at either level. The init step runs as the agent's user too,
// so what it writes is the agent's without a chown.
func runSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](runUser),
		RunAsGroup:               ptr.To[int64](runUser),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// podSecurityContext keeps the template's pod security context and adds
// what the run needs: fsGroup, so the agent's user owns the volumes, and
// the RuntimeDefault seccomp profile where none is set. An explicit
// setting is kept so that a violation is refused, never silently changed.
func podSecurityContext(tmpl *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{}
	if tmpl != nil {
		sc = tmpl.DeepCopy()
	}
	sc.FSGroup = ptr.To[int64](runUser)
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return sc
}

// restrictedDefaults fills, at restricted, what the level requires and the
// template left unset: runAsNonRoot for the pod, and no privilege
// escalation and every capability dropped for each container. Capabilities
// a container adds stay added (restricted allows NET_BIND_SERVICE).
func restrictedDefaults(ps *corev1.PodSpec) {
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	if ps.SecurityContext.RunAsNonRoot == nil {
		ps.SecurityContext.RunAsNonRoot = ptr.To(true)
	}
	for _, list := range [][]corev1.Container{ps.InitContainers, ps.Containers} {
		for i := range list {
			containerDefaults(&list[i])
		}
	}
}

func containerDefaults(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil {
		sc.AllowPrivilegeEscalation = ptr.To(false)
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		sc.Capabilities.Drop = append(sc.Capabilities.Drop, "ALL")
	}
}

// securePod fills the level's defaults into the run pod (pod, as built)
// and refuses it, naming the fields, when it breaks the level or one of the
// rules that hold at every level. station is the Station's name and tmpl
// its template as written: the rules read what it asked for (a token
// mount the controller would turn off), and its init containers, which the
// controller replaces, are held to the level too so the Job check refuses
// what admission refuses.
func securePod(station string, tmpl, pod *corev1.PodTemplateSpec, level PodSecurityLevel) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: Station %s: %s", ErrInvalidTemplate, station, fmt.Sprintf(format, args...))
	}
	if broken := alwaysRefused(&tmpl.Spec); len(broken) > 0 {
		return fail("%s", strings.Join(broken, "; "))
	}
	level = level.effective()
	for i := range pod.Spec.Volumes {
		// A volume without a source is an emptyDir to Kubernetes, which
		// defaults it so; the evaluator would call its type unknown.
		if v := &pod.Spec.Volumes[i]; v.VolumeSource == (corev1.VolumeSource{}) {
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
	}
	if level == PodSecurityRestricted {
		restrictedDefaults(&pod.Spec)
	}
	checked := pod.Spec.DeepCopy()
	for _, c := range tmpl.Spec.InitContainers {
		if !slices.ContainsFunc(checked.InitContainers, func(o corev1.Container) bool { return o.Name == c.Name }) {
			c = *c.DeepCopy()
			if level == PodSecurityRestricted {
				containerDefaults(&c)
			}
			checked.InitContainers = append(checked.InitContainers, c)
		}
	}
	ev, err := evaluator()
	if err != nil {
		return fmt.Errorf("pod security evaluator: %w", err)
	}
	lv := api.LevelVersion{Level: api.Level(level), Version: api.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &pod.ObjectMeta, checked))
	if !res.Allowed {
		return fail("spec.template violates PodSecurity %q (the controller's --pod-security-level): %s", lv.String(), res.ForbiddenDetail())
	}
	return nil
}

// alwaysRefused returns the rules, at every level, that ps breaks: a
// shared process namespace (the agent's processes, environment and
// secrets visible to every sidecar), a projected service account token
// and an explicit automountServiceAccountToken: true (the run pod has no
// Kubernetes API access, docs/architecture.md).
func alwaysRefused(ps *corev1.PodSpec) []string {
	var out []string
	if ptr.Deref(ps.ShareProcessNamespace, false) {
		out = append(out, "spec.template.spec.shareProcessNamespace must not be true")
	}
	if ptr.Deref(ps.AutomountServiceAccountToken, false) {
		out = append(out, "spec.template.spec.automountServiceAccountToken must not be true: a run pod gets no Kubernetes API token")
	}
	for _, v := range ps.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				out = append(out, fmt.Sprintf("spec.template.spec.volumes[%s].projected.sources[].serviceAccountToken must not be set: a run pod gets no Kubernetes API token", v.Name))
				break
			}
		}
	}
	return out
}
