package node

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectSource reads the Secrets and ConfigMaps env and volumes refer to.
// It caches per pod start, so one object is read once per container.
type objectSource struct {
	n          *Node
	ns         string
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func newObjectSource(n *Node, ns string) *objectSource {
	return &objectSource{n: n, ns: ns, secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
}

// secret returns the Secret, or nil when it is missing and optional.
func (s *objectSource) secret(ctx context.Context, name string, optional *bool) (*corev1.Secret, error) {
	if o, ok := s.secrets[name]; ok {
		return o, nil
	}
	o, err := s.n.kube.CoreV1().Secrets(s.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %q: %w", name, err)
	}
	s.secrets[name] = o
	return o, nil
}

// configMap returns the ConfigMap, or nil when it is missing and optional.
func (s *objectSource) configMap(ctx context.Context, name string, optional *bool) (*corev1.ConfigMap, error) {
	if o, ok := s.configMaps[name]; ok {
		return o, nil
	}
	o, err := s.n.kube.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read configmap %q: %w", name, err)
	}
	s.configMaps[name] = o
	return o, nil
}

// envContext is what a container's environment depends on beyond its
// spec.
type envContext struct {
	// defaults are set first (KEY=value); nil means host mode's PATH and
	// HOME. Image mode passes only what the image's own env lacks.
	defaults []string
	// podIP answers status.podIP.
	podIP string
}

// containerEnv resolves a container's environment as a kubelet does:
// defaults, then envFrom, then env in order, expanding $(VAR) references to
// variables defined before.
func (n *Node) containerEnv(ctx context.Context, src *objectSource, pod *corev1.Pod, c *corev1.Container, ec envContext) ([]string, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	if ec.defaults == nil {
		home := "/root"
		if uid, _ := runAs(pod, c); uid != nil && *uid != 0 {
			home = "/"
		}
		ec.defaults = []string{"PATH=" + defaultPath, "HOME=" + home}
	}
	for _, kv := range ec.defaults {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	set("HOSTNAME", pod.Name)
	// In-cluster clients reach the API server at its own address: with a
	// pod network namespace, localnode forwards that loopback address
	// into the pod (see apiproxy.go), so its serving certificate matches.
	set("KUBERNETES_SERVICE_HOST", n.apiHost)
	set("KUBERNETES_SERVICE_PORT", n.apiPort)
	set("KUBERNETES_SERVICE_PORT_HTTPS", n.apiPort)
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := src.configMap(ctx, ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional)
			if err != nil {
				return nil, err
			}
			if cm != nil {
				for k, v := range cm.Data {
					set(ef.Prefix+k, v)
				}
			}
		case ef.SecretRef != nil:
			s, err := src.secret(ctx, ef.SecretRef.Name, ef.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			if s != nil {
				for k, v := range s.Data {
					set(ef.Prefix+k, string(v))
				}
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		v, ok, err := n.envValueFrom(ctx, src, pod, c, e.ValueFrom, ec.podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

// envValueFrom resolves one valueFrom; ok is false for an optional key that
// is absent.
func (n *Node) envValueFrom(ctx context.Context, src *objectSource, pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, podIP string) (string, bool, error) {
	switch {
	case from.SecretKeyRef != nil:
		r := from.SecretKeyRef
		s, err := src.secret(ctx, r.Name, r.Optional)
		if err != nil || s == nil {
			return "", false, err
		}
		v, ok := s.Data[r.Key]
		if !ok {
			if r.Optional != nil && *r.Optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q has no key %q", r.Name, r.Key)
		}
		return string(v), true, nil
	case from.ConfigMapKeyRef != nil:
		r := from.ConfigMapKeyRef
		cm, err := src.configMap(ctx, r.Name, r.Optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		if v, ok := cm.Data[r.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[r.Key]; ok {
			return string(v), true, nil
		}
		if r.Optional != nil && *r.Optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %q has no key %q", r.Name, r.Key)
	case from.FieldRef != nil:
		v, err := fieldValue(pod, from.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := n.resourceValue(pod, c, from.ResourceFieldRef)
		return v, err == nil, err
	}
	return "", false, fmt.Errorf("unsupported valueFrom source")
}

// fieldValue resolves a downward-API field path; podIP is the pod's
// address on this node.
func fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// resourceValue resolves a resourceFieldRef: the container's request or
// limit, a limit defaulting to the node's capacity.
func (n *Node) resourceValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		c = findContainer(pod, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef names unknown container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	var q resource.Quantity
	var found bool
	switch kind {
	case "limits":
		q, found = c.Resources.Limits[corev1.ResourceName(name)]
	case "requests":
		q, found = c.Resources.Requests[corev1.ResourceName(name)]
	default:
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	if !found {
		q = n.nodeStatus(nil).Allocatable[corev1.ResourceName(name)]
		if kind == "requests" {
			q = resource.Quantity{}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
	return strconv.FormatInt(int64(v), 10), nil
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// expand replaces $(VAR) with defined variables; $$ escapes a $, and an
// undefined reference is kept as written, as the kubelet does.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// runAs returns the effective runAsUser and runAsGroup of a container.
func runAs(pod *corev1.Pod, c *corev1.Container) (*int64, *int64) {
	var uid, gid *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	return uid, gid
}
