package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestImageArgv follows the table of
// https://kubernetes.io/docs/tasks/inject-data-application/define-command-argument-container/#notes
func TestImageArgv(t *testing.T) {
	cfg := v1.Config{Entrypoint: []string{"/ep-1", "foo"}, Cmd: []string{"bar"}}
	vals := map[string]string{"X": "x"}
	cases := []struct {
		rule          string
		command, args []string
		want          string
	}{
		{"neither: the image's Entrypoint and Cmd", nil, nil, "/ep-1 foo bar"},
		{"command only: the image's Cmd is dropped", []string{"/ep-2"}, nil, "/ep-2"},
		{"args only: they replace the image's Cmd", nil, []string{"zoo", "$(X)"}, "/ep-1 foo zoo x"},
		{"both: the container's", []string{"/ep-2"}, []string{"zoo"}, "/ep-2 zoo"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := imageArgv(&corev1.Container{Command: tc.command, Args: tc.args}, cfg, vals)
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("argv %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveIdentity(t *testing.T) {
	rootfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"passwd": "root:x:0:0::/root:/bin/sh\napp:x:1001:1002::/home/app:/bin/sh\n",
		"group":  "root:x:0:\napp:x:1002:\nwheel:x:10:app,other\nstaff:x:50:\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(rootfs, "etc", n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(sc *corev1.PodSecurityContext) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: sc}}
	}
	cases := []struct {
		rule      string
		user      string
		pod       *corev1.Pod
		container *corev1.SecurityContext
		uid, gid  uint32
		groups    []uint32
		home      string
		fails     bool
	}{
		{rule: "no user: root", pod: pod(nil), uid: 0, gid: 0, groups: []uint32{}, home: "/root"},
		{rule: "numeric uid:gid", user: "65532:65532", pod: pod(nil), uid: 65532, gid: 65532, groups: []uint32{}, home: "/"},
		{rule: "a name: its passwd entry and group memberships", user: "app", pod: pod(nil), uid: 1001, gid: 1002, groups: []uint32{10}, home: "/home/app"},
		{rule: "name:group", user: "app:staff", pod: pod(nil), uid: 1001, gid: 50, groups: []uint32{10}, home: "/home/app"},
		{rule: "an unknown name fails", user: "nobody-here", pod: pod(nil), fails: true},
		{rule: "runAsUser wins, its group from passwd", user: "65532:65532", pod: pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1001)}), uid: 1001, gid: 1002, groups: []uint32{10}, home: "/home/app"},
		{rule: "the container's runAsGroup over the pod's; fsGroup is supplementary", user: "app",
			pod:       pod(&corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](7), FSGroup: ptr.To[int64](3000)}),
			container: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](8)}, uid: 1001, gid: 8, groups: []uint32{10, 3000}, home: "/home/app"},
		{rule: "runAsNonRoot refuses root", pod: pod(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}), fails: true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			id, err := resolveIdentity(tc.pod, &corev1.Container{SecurityContext: tc.container}, v1.Config{User: tc.user}, rootfs)
			if tc.fails {
				if err == nil {
					t.Fatalf("resolved %+v, want an error", id)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.uid != tc.uid || id.gid != tc.gid || !slices.Equal(id.groups, tc.groups) || id.home != tc.home {
				t.Fatalf("got uid %d gid %d groups %v home %s, want %d %d %v %s", id.uid, id.gid, id.groups, id.home, tc.uid, tc.gid, tc.groups, tc.home)
			}
		})
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/img", "A=image", "B=image"}, []string{"HOSTNAME=p", "A=container"})
	want := []string{"PATH=/img", "A=container", "B=image", "HOSTNAME=p"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
