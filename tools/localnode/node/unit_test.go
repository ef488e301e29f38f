package node

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnfit(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"kubernetes.io/hostname": "n", "tier": "2"}}}
	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoSchedule}}
	preferNo := node.DeepCopy()
	preferNo.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	affinity := func(reqs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
		}}}
	}
	cases := []struct {
		name string
		node *corev1.Node
		spec corev1.PodSpec
		fits bool
	}{
		{name: "a plain pod fits", node: node, fits: true},
		{name: "matching nodeSelector fits", node: node, spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "n"}}, fits: true},
		{name: "other nodeSelector value does not fit", node: node, spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "m"}}},
		{name: "untolerated NoSchedule taint does not fit", node: tainted},
		{name: "toleration by key and Exists fits", node: tainted, spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists}}}, fits: true},
		{name: "toleration with the wrong effect does not fit", node: tainted, spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}},
		{name: "tolerate-everything fits", node: tainted, spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, fits: true},
		{name: "PreferNoSchedule taint still fits", node: preferNo, fits: true},
		{name: "a cordoned node does not fit", node: cordoned},
		{name: "required affinity In fits", node: node, spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorRequirement{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"1", "2"}})}, fits: true},
		{name: "required affinity Gt fails", node: node, spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorRequirement{Key: "tier", Operator: corev1.NodeSelectorOpGt, Values: []string{"5"}})}},
		{name: "required affinity DoesNotExist fails", node: node, spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorRequirement{Key: "tier", Operator: corev1.NodeSelectorOpDoesNotExist})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason := unfit(&corev1.Pod{Spec: tc.spec}, tc.node)
			if (reason == "") != tc.fits {
				t.Fatalf("fits=%v, want %v (reason %q)", reason == "", tc.fits, reason)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	cases := map[string]string{
		"$(A)-$(B)":    "1-two",
		"$$(A)":        "$(A)",
		"$(MISSING)":   "$(MISSING)",
		"plain $HOME":  "plain $HOME",
		"end$":         "end$",
		"$(unclosed":   "$(unclosed",
		"a$$b":         "a$b",
		"$(A)$(A)$(B)": "11two",
	}
	for in, want := range cases {
		if got := expand(in, vals); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWriteLog exercises the log reader on a file in the CRI format,
// including partial records.
func TestWriteLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	content := ""
	for i, rec := range []string{"stdout F one", "stderr F two", "stdout P thr", "stdout F ee", "stdout P no-newline"} {
		content += t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " " + rec + "\n"
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts logOptions
		want string
	}{
		{name: "all", opts: logOptions{tail: -1}, want: "one\ntwo\nthree\nno-newline"},
		{name: "tail counts records", opts: logOptions{tail: 2}, want: "ee\nno-newline"},
		{name: "tail zero", opts: logOptions{tail: 0}, want: ""},
		{name: "limit", opts: logOptions{tail: -1, limitBytes: 6}, want: "one\ntw"},
		{name: "since", opts: logOptions{tail: -1, since: t0.Add(1500 * time.Millisecond)}, want: "three\nno-newline"},
		{name: "timestamps", opts: logOptions{tail: 1, timestamps: true}, want: t0.Add(4*time.Second).Format(time.RFC3339Nano) + " no-newline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeLog(context.Background(), &b, path, tc.opts); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
