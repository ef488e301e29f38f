package node

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestParseSimulatedRuns(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		min, max time.Duration
		bad      bool
	}{
		{name: "a range is MIN-MAX", in: "30s-120s", min: 30 * time.Second, max: 2 * time.Minute},
		{name: "spaces around the dash are allowed", in: "1m - 90s", min: time.Minute, max: 90 * time.Second},
		{name: "one length is a range of one", in: "45s", min: 45 * time.Second, max: 45 * time.Second},
		{name: "zero lengths finish at once", in: "0s-0s"},
		{name: "MAX below MIN is refused", in: "120s-30s", bad: true},
		{name: "a missing MAX is refused", in: "30s-", bad: true},
		{name: "a missing MIN is refused", in: "-30s", bad: true},
		{name: "a number without unit is refused", in: "30-120", bad: true},
		{name: "empty is refused", in: "", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSimulatedRuns(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseSimulatedRuns(%q) = %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Min != tc.min || got.Max != tc.max {
				t.Fatalf("ParseSimulatedRuns(%q) = %s-%s, want %s-%s", tc.in, got.Min, got.Max, tc.min, tc.max)
			}
		})
	}
}

func TestRunLengthIsPerPodInTheRangeAndStable(t *testing.T) {
	r := SimulatedRuns{Min: 30 * time.Second, Max: 120 * time.Second}
	seen := map[time.Duration]bool{}
	lo, hi := r.Max, r.Min
	for i := range 1000 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("6b1f0c2e-%04d-4d8e-9c1a-5f3e2d1c0b%02d", i, i%100))}}
		d := r.runLength(pod)
		if d < r.Min || d > r.Max {
			t.Fatalf("run length %s outside %s-%s", d, r.Min, r.Max)
		}
		if again := r.runLength(pod); again != d {
			t.Fatalf("the same pod got %s, then %s", d, again)
		}
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	// 1,000 pods spread over the range, not bunched at one end.
	if len(seen) < 900 || hi-lo < (r.Max-r.Min)*9/10 {
		t.Fatalf("1000 pods got %d distinct lengths spanning %s-%s", len(seen), lo, hi)
	}
	if d := (SimulatedRuns{Min: time.Second, Max: time.Second}).runLength(&corev1.Pod{}); d != time.Second {
		t.Fatalf("a range of one gave %s", d)
	}
}

func simulatedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "i"},
				{Name: "sidecar", Image: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{Name: "agent", Image: "a"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: "Other"}}},
	}
}

func TestSimulatedStatusRunsThenSucceeds(t *testing.T) {
	const length = 40 * time.Second
	now := time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)
	pod := simulatedPod()

	st, next := simulatedStatus(pod, length, now)
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) // to the second, as the API stores it
	if st.Phase != corev1.PodRunning || st.StartTime == nil || !st.StartTime.Time.Equal(start) || !next.Equal(start.Add(length)) {
		t.Fatalf("first status: phase %s, start %v, next %v", st.Phase, st.StartTime, next)
	}
	state := func(st corev1.PodStatus) map[string]string {
		out := map[string]string{}
		for _, cs := range append(append([]corev1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
			switch {
			case cs.State.Running != nil && cs.Ready:
				out[cs.Name] = "running, ready"
			case cs.State.Terminated != nil:
				out[cs.Name] = fmt.Sprintf("terminated %d %s at +%s", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason,
					cs.State.Terminated.FinishedAt.Sub(start))
			default:
				out[cs.Name] = fmt.Sprintf("%+v", cs.State)
			}
		}
		for _, c := range st.Conditions {
			out[string(c.Type)] = string(c.Status) + " " + c.Reason
		}
		return out
	}
	want := map[string]string{"setup": "terminated 0 Completed at +40s", "sidecar": "running, ready", "agent": "running, ready",
		"PodScheduled": "True ", "Initialized": "True ", "PodReadyToStartContainers": "True ", "ContainersReady": "True ", "Ready": "True ",
		"DisruptionTarget": "False Other"}
	if got := state(st); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("running status:\n got %v\nwant %v", got, want)
	}
	if st.QOSClass != corev1.PodQOSBestEffort || st.PodIP != hostIP {
		t.Fatalf("running status lost the QOS class or has pod IP %q", st.PodIP)
	}

	// Written, then seen again later in the run: the same status, no write.
	pod.Status = st
	again, next2 := simulatedStatus(pod, length, now.Add(30*time.Second))
	if !equality.Semantic.DeepEqual(again, st) || !next2.Equal(next) {
		t.Fatalf("the status changed mid-run:\n%+v\n%+v", st, again)
	}

	done, last := simulatedStatus(pod, length, next)
	if done.Phase != corev1.PodSucceeded || !last.IsZero() {
		t.Fatalf("at the end: phase %s, next %v", done.Phase, last)
	}
	want = map[string]string{"setup": "terminated 0 Completed at +40s", "sidecar": "terminated 0 Completed at +40s", "agent": "terminated 0 Completed at +40s",
		"PodScheduled": "True ", "Initialized": "True ", "PodReadyToStartContainers": "False ", "ContainersReady": "False PodCompleted",
		"Ready": "False PodCompleted", "DisruptionTarget": "False Other"}
	if got := state(done); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("final status:\n got %v\nwant %v", got, want)
	}
}
