package node_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestTerminationMessage: as a kubelet does, a container's termination
// message file (terminationMessagePath, /dev/termination-log by default)
// is its own, writable by the container's user, and what it holds when the
// container ends (its last 4096 bytes) is the message of its terminated
// state; under FallbackToLogsOnError, a failed container that wrote none
// gets the tail of its log.
func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	asUser := func(c corev1.Container) corev1.Container {
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)}
		return c
	}
	fallback := func(c corev1.Container) corev1.Container {
		c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		return c
	}
	cases := []struct {
		rule  string
		image bool
		c     corev1.Container
		want  func(msg string) bool
	}{
		{rule: "what a non-root container wrote to /dev/termination-log is its message",
			c:    asUser(sh("main", "printf 'all done' > /dev/termination-log")),
			want: func(m string) bool { return m == "all done" }},
		{rule: "a terminationMessagePath of the container's own is honoured",
			c: func() corev1.Container {
				c := sh("main", "printf moved > /run/localnode-test/termination/msg")
				c.TerminationMessagePath = "/run/localnode-test/termination/msg"
				return c
			}(),
			want: func(m string) bool { return m == "moved" }},
		{rule: "only the last 4096 bytes are kept",
			c:    sh("main", "head -c 5000 /dev/zero | tr '\\0' x > /dev/termination-log; printf END >> /dev/termination-log"),
			want: func(m string) bool { return len(m) == 4096 && strings.HasSuffix(m, "xEND") }},
		{rule: "a failed container that wrote nothing has no message under File",
			c:    sh("main", "echo oops; exit 3"),
			want: func(m string) bool { return m == "" }},
		{rule: "a failed container that wrote nothing gets its log tail under FallbackToLogsOnError",
			c:    fallback(sh("main", "echo first; echo oops; exit 3")),
			want: func(m string) bool { return m == "first\noops\n" }},
		{rule: "the file wins over the log under FallbackToLogsOnError",
			c:    fallback(sh("main", "printf mine > /dev/termination-log; echo log; exit 3")),
			want: func(m string) bool { return m == "mine" }},
		{rule: "a container that succeeded gets no log tail under FallbackToLogsOnError",
			c:    fallback(sh("main", "echo fine")),
			want: func(m string) bool { return m == "" }},
		{rule: "in image mode, the image's non-root user writes it in the container's /dev", image: true,
			c:    corev1.Container{Name: "main", Image: probeImage, Args: []string{"terminate", "from the image"}},
			want: func(m string) bool { return m == "from the image" }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			pod := podSpec("p", c.c)
			if c.image {
				startImageNode(t)
				pod = onImageNode(pod)
			}
			createPod(t, ns, pod)
			p := waitPod(t, ns, "p", "a terminal phase", terminal)
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				t.Fatalf("no terminated state: %s", describe(p))
			}
			if msg := p.Status.ContainerStatuses[0].State.Terminated.Message; !c.want(msg) {
				t.Fatalf("message %q (%d bytes)", msg, len(msg))
			}
		})
	}
}
