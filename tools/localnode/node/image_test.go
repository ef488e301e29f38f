package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentplane/agentplane/tools/localnode/node"
)

// TestImageMode runs containers from the test image: chrooted into its
// root (its files, not the host's), as its user, with Kubernetes' rules
// for command/args, env, workingDir and securityContext applied over the
// image's config.
func TestImageMode(t *testing.T) {
	t.Parallel()
	startImageNode(t)
	probe := func(mod func(*corev1.Container)) corev1.Container {
		c := corev1.Container{Name: "main", Image: probeImage, Env: []corev1.EnvVar{{Name: "OVERRIDE", Value: "container"}}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	shared := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	cases := []struct {
		name    string
		pod     func() *corev1.Pod
		want    []string
		notWant []string
	}{
		{
			name: "the image's entrypoint and cmd run as its user in its root",
			pod:  func() *corev1.Pod { return podSpec("p", probe(nil)) },
			want: []string{"ARGV=podprobe info", "UID=65532", "GID=65532", "GROUPS=[4000]", "CWD=/work", "HOSTNAME=p",
				"ENV_FROM_IMAGE=yes", "ENV_OVERRIDE=container", "ENV_HOME=/home/nonroot", "ENV_PATH=/usr/local/bin:/bin",
				"MARKER=true", "HOST_FILE=false", "DEV_NULL=true", "PROC=true", "TMP_WRITE=ok"},
		},
		{
			name: "args replace the image's cmd",
			pod: func() *corev1.Pod {
				return podSpec("p", probe(func(c *corev1.Container) { c.Args = []string{"info", "from-args"} }))
			},
			want: []string{"ARGV=podprobe info from-args"},
		},
		{
			name: "command replaces entrypoint and cmd, with $(VAR) expansion",
			pod: func() *corev1.Pod {
				return podSpec("p", probe(func(c *corev1.Container) {
					c.Command = []string{"/usr/bin/podprobe"}
					c.Args = []string{"info", "$(OVERRIDE)"}
				}))
			},
			want: []string{"ARGV=/usr/bin/podprobe info container"},
		},
		{
			name: "securityContext and workingDir win over the image's",
			pod: func() *corev1.Pod {
				p := podSpec("p", probe(func(c *corev1.Container) {
					c.SecurityContext = &corev1.SecurityContext{RunAsGroup: ptr.To[int64](2000)}
					c.WorkingDir = "/data/sub"
				}))
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{5000}}
				return p
			},
			want: []string{"UID=1000", "GID=2000", "GROUPS=[3000 5000]", "CWD=/data/sub", "ENV_HOME=/"},
		},
		{
			name: "an init container runs from the image too and shares volumes",
			pod: func() *corev1.Pod {
				initC := probe(func(c *corev1.Container) {
					c.Name, c.Args, c.VolumeMounts = "init", []string{"info", "write-shared"}, shared
				})
				p := podSpec("p", probe(func(c *corev1.Container) { c.Args, c.VolumeMounts = []string{"info", "shared"}, shared }))
				p.Spec.InitContainers = []corev1.Container{initC}
				p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				return p
			},
			want: []string{"SHARED=from-init <nil>"},
		},
		{
			name: "readOnlyRootFilesystem keeps the root read-only, volumes writable",
			pod: func() *corev1.Pod {
				p := podSpec("p", probe(func(c *corev1.Container) {
					c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true)}
					c.Args, c.VolumeMounts = []string{"info", "write-shared"}, shared
				}))
				p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				return p
			},
			want: []string{"TMP_WRITE=open /tmp/probe-write: read-only file system", "SHARED_WRITE=<nil>", "MARKER=true"},
		},
		{
			name: "an image from an OCI layout",
			pod:  func() *corev1.Pod { return podSpec("p", probe(func(c *corev1.Container) { c.Image = layoutImage })) },
			want: []string{"MARKER=true", "UID=65532"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			log := runToLog(t, ns, onImageNode(tc.pod()), "main")
			wantLines(t, log, tc.want...)
			p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if id := p.Status.ContainerStatuses[0].ImageID; !strings.HasPrefix(id, "sha256:") {
				t.Errorf("imageID %q, want the image's config digest", id)
			}
			if !strings.HasPrefix(p.Status.PodIP, "10.88.") {
				t.Errorf("podIP %q, want one of the node's pod subnet", p.Status.PodIP)
			}
			if !strings.Contains(log, p.Status.PodIP+`\tp\n`) {
				t.Errorf("/etc/hosts lacks the pod's address and name:\n%s", log)
			}
		})
	}
}

// TestImageNotInStoreRunsOnTheHost: a container whose image the store does
// not hold runs as a host process, as on a node without a store.
func TestImageNotInStoreRunsOnTheHost(t *testing.T) {
	t.Parallel()
	startImageNode(t)
	ns := env.Namespace(t)
	pod := onImageNode(podSpec("host", sh("main", "test -f /etc/debian_version && echo on-the-host; hostname")))
	wantLines(t, runToLog(t, ns, pod, "main"), "on-the-host", "host")
}

// TestInClusterClientRunsWithTheChartsRBAC: the ServiceAccount token,
// CA and namespace are in the pod, and client-go's in-cluster config
// reaches the API server with them, verified TLS included; RBAC decides:
// the Role allows reading ConfigMaps and nothing else.
func TestInClusterClientRunsWithTheChartsRBAC(t *testing.T) {
	t.Parallel()
	startImageNode(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
		return err
	}, func() error {
		_, err := env.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-cm"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		return err
	}, func() error {
		_, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-cm"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-cm"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "probe", Namespace: ns}}}, metav1.CreateOptions{})
		return err
	}, func() error {
		_, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed"}}, metav1.CreateOptions{})
		return err
	})
	pod := podSpec("kube", corev1.Container{Name: "main", Image: probeImage, Args: []string{"kube", ns}})
	pod.Spec.ServiceAccountName = "probe"
	withAPIAccess(pod)
	log := runToLog(t, ns, onImageNode(pod), "main")
	wantLines(t, log, "SA_FILE_token=true", "SA_FILE_ca.crt=true", "SA_FILE_namespace=true", "GET_CONFIGMAP=ok", "LIST_SECRETS=forbidden")
}

// TestTokenIsRefreshed: the projected token is rewritten (atomically,
// through the ..data symlink) while the container runs.
func TestTokenIsRefreshed(t *testing.T) {
	startImageNode(t)
	defer node.SetTokenRefreshForTest(2 * time.Second)()
	ns := env.Namespace(t)
	pod := withAPIAccess(podSpec("token", corev1.Container{Name: "main", Image: probeImage, Args: []string{"token"}}))
	wantLines(t, runToLog(t, ns, onImageNode(pod), "main"), "TOKEN=changed")
}

// withAPIAccess adds the projected volume and mount the API server's
// ServiceAccount admission would add. envtest turns that admission plugin
// off (kubestack's test covers it on), so the test pod declares it, to
// the letter.
func withAPIAccess(pod *corev1.Pod) *corev1.Pod {
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x1y2z", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}},
	}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x1y2z", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	return pod
}

// mustCreate runs each create and fails the test on the first error.
func mustCreate(t *testing.T, fns ...func() error) {
	t.Helper()
	for _, f := range fns {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
}
