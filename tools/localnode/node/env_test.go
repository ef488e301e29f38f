package node_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runToLog runs a pod to completion and returns its container's log.
func runToLog(t *testing.T, ns string, pod *corev1.Pod, container string) string {
	t.Helper()
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, "a terminal phase", terminal)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod did not succeed: %s\nlog:\n%s", describe(p), logs(t, ns, pod.Name, &corev1.PodLogOptions{Container: container}))
	}
	return logs(t, ns, pod.Name, &corev1.PodLogOptions{Container: container})
}

func wantLines(t *testing.T, log string, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(log, "\n") {
		have[l] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("log lacks line %q; log:\n%s", w, log)
		}
	}
}

// TestEnvResolution: env from Secret and ConfigMap keys, envFrom with a
// prefix, downward-API fields, $(VAR) expansion in env and args, and the
// working directory.
func TestEnvResolution(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "hunter2", "TOKEN": "t0k"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"greeting": "hi", "color": "blue"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := sh("main", `echo "FROM_SECRET=$FROM_SECRET"; echo "FROM_CM=$FROM_CM"; echo "POD=$POD"; echo "NS=$NS"; echo "NODE=$NODE";
echo "IP=$IP"; echo "APP=$APP"; echo "COMPOSED=$COMPOSED"; echo "CM_color=$CM_color"; echo "TOKEN=$TOKEN"; echo "OPT=${OPT-unset}"; echo "PWD=$(pwd)"; echo "ARG=$0"`)
	c.Command = append(c.Command, "$(POD)-arg")
	c.WorkingDir = "/tmp"
	c.Env = []corev1.EnvVar{
		{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "FROM_CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}},
		{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
		{Name: "COMPOSED", Value: "$(FROM_CM)-$(POD)-$$(literal)"},
		{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "absent", Optional: ptr.To(true)}}},
	}
	c.EnvFrom = []corev1.EnvFromSource{
		{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
	}
	pod := podSpec("env", c)
	pod.Labels = map[string]string{"app": "demo"}
	log := runToLog(t, ns, pod, "main")
	wantLines(t, log, "FROM_SECRET=hunter2", "FROM_CM=hi", "POD=env", "NS="+ns, "NODE=localnode", "IP=127.0.0.1",
		"APP=demo", "COMPOSED=hi-env-$(literal)", "CM_color=blue", "TOKEN=t0k", "OPT=unset", "PWD=/tmp", "ARG=env-arg")
}

// TestMissingSecretKeepsPodWaiting: a container whose env refers to a
// Secret that doesn't exist waits with CreateContainerConfigError, and
// starts once the Secret appears.
func TestMissingSecretKeepsPodWaiting(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	c := sh("main", `echo "V=$V"`)
	c.Env = []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "k"}}}}
	createPod(t, ns, podSpec("waits", c))
	waitPod(t, ns, "waits", "CreateContainerConfigError", func(p *corev1.Pod) bool {
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "later"}, StringData: map[string]string{"k": "arrived"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "waits", "Succeeded", phaseIs(corev1.PodSucceeded))
	wantLines(t, logs(t, ns, "waits", &corev1.PodLogOptions{}), "V=arrived")
}

// TestVolumes: each volume kind is visible at its mount path inside the
// container's private mount namespace.
func TestVolumes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vol-secret"}, StringData: map[string]string{"pw": "s3cret", "other": "x"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vol-cm"}, Data: map[string]string{"a.txt": "alpha", "b.txt": "beta"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		volumes  []corev1.Volume
		init     []corev1.Container
		mounts   []corev1.VolumeMount
		script   string
		want     []string
		runAsUID *int64
	}{
		{
			name:    "a file the init container writes to an emptyDir is read by the main container",
			volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			init: []corev1.Container{func() corev1.Container {
				c := sh("inject", "echo injected-bundle > /run/localnode-test/work/bundle.txt")
				c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/run/localnode-test/work"}}
				return c
			}()},
			mounts: []corev1.VolumeMount{{Name: "work", MountPath: "/run/localnode-test/agent"}},
			script: "cat /run/localnode-test/agent/bundle.txt",
			want:   []string{"injected-bundle"},
		},
		{
			name: "secret items are written with their mode",
			volumes: []corev1.Volume{{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "vol-secret", Items: []corev1.KeyToPath{{Key: "pw", Path: "nested/password", Mode: ptr.To[int32](0o400)}},
			}}}},
			mounts: []corev1.VolumeMount{{Name: "sec", MountPath: "/run/localnode-test/secret", ReadOnly: true}},
			script: "cat /run/localnode-test/secret/nested/password; echo; stat -c mode=%a /run/localnode-test/secret/nested/password; ls /run/localnode-test/secret; touch /run/localnode-test/secret/x 2>/dev/null || echo read-only",
			want:   []string{"s3cret", "mode=400", "nested", "read-only"},
		},
		{
			name:    "configMap keys become files",
			volumes: []corev1.Volume{{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}}},
			mounts:  []corev1.VolumeMount{{Name: "cm", MountPath: "/run/localnode-test/cm"}},
			script:  "cat /run/localnode-test/cm/a.txt; echo; cat /run/localnode-test/cm/b.txt; echo",
			want:    []string{"alpha", "beta"},
		},
		{
			name: "the projected service-account token comes from the TokenRequest API",
			// envtest disables the ServiceAccount admission plugin, so the
			// volume it would inject is spelled out here.
			volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o644),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				},
			}}}},
			mounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			script: "d=/var/run/secrets/kubernetes.io/serviceaccount; test -s $d/token && echo token-present; cat $d/namespace; echo; test -s $d/ca.crt && echo ca-present",
			want:   []string{"token-present", ns, "ca-present"},
		},
		{
			name:     "runAsUser applies to the process",
			volumes:  []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			mounts:   []corev1.VolumeMount{{Name: "scratch", MountPath: "/run/localnode-test/scratch"}},
			script:   "echo uid=$(id -u); touch /run/localnode-test/scratch/f && echo can-write",
			want:     []string{"uid=1234", "can-write"},
			runAsUID: ptr.To[int64](1234),
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := sh("main", tc.script)
			c.VolumeMounts = tc.mounts
			pod := podSpec("vol-"+string(rune('a'+i)), c)
			pod.Spec.Volumes = tc.volumes
			pod.Spec.InitContainers = tc.init
			if len(tc.volumes) > 0 && tc.volumes[0].Projected != nil {
				pod.Spec.ServiceAccountName = "default"
			}
			if tc.runAsUID != nil {
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.runAsUID}
			}
			wantLines(t, runToLog(t, ns, pod, "main"), tc.want...)
		})
	}
}
