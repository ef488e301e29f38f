package agentruntime

import (
	"context"
	corev1 "k8s.io/api/core/v1"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// TestFoldReports checks each rule of folding the facades' per-pod
// reports into the aggregate the idle rules read, and what the idle
// deadline then decides.
func TestFoldReports(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return ptr(metav1.NewTime(t0.Add(d))) }
	entry := func(pod string, n int32, d time.Duration) omniav1.FacadeReport {
		return omniav1.FacadeReport{Pod: pod, ActiveSessions: n, LastActivityTime: at(d)}
	}
	running := metav1.Condition{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonRuntimeReady, LastTransitionTime: *at(0), ObservedGeneration: 1}
	both := map[string]bool{"pod-a": true, "pod-b": true}
	cases := []struct {
		name string
		st   omniav1.AgentRuntimeStatus
		pods map[string]bool
		// want* are the folded status; wantLast nil means unset.
		wantReports  []omniav1.FacadeReport
		wantSessions *int32
		wantLast     *metav1.Time
		// now is when the idle rules run (idleTimeout 10m); wantReaped is
		// whether the deadline has passed then.
		now        time.Duration
		wantReaped bool
	}{
		{name: "a busy pod keeps the agent up whatever the others report",
			st:          omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{entry("pod-a", 2, 0), entry("pod-b", 0, time.Minute)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", 2, 0), entry("pod-b", 0, time.Minute)}, wantSessions: ptr(int32(2)), wantLast: at(time.Minute),
			now: 24 * time.Hour},
		{name: "the sessions of every pod add up",
			st:          omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{entry("pod-a", 2, 0), entry("pod-b", 3, 0)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", 2, 0), entry("pod-b", 3, 0)}, wantSessions: ptr(int32(5)), wantLast: at(0),
			now: 24 * time.Hour},
		{name: "the entry of a deleted pod does not count",
			st:          omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{entry("pod-a", 2, 0), entry("pod-b", 0, time.Minute)}},
			pods:        map[string]bool{"pod-b": true},
			wantReports: []omniav1.FacadeReport{entry("pod-b", 0, time.Minute)}, wantSessions: ptr(int32(0)), wantLast: at(time.Minute),
			now: 11 * time.Minute, wantReaped: true},
		{name: "the time of a deleted pod's entry still moves the deadline",
			st:          omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{entry("pod-a", 2, 5*time.Minute), entry("pod-b", 0, time.Minute)}},
			pods:        map[string]bool{"pod-b": true},
			wantReports: []omniav1.FacadeReport{entry("pod-b", 0, time.Minute)}, wantSessions: ptr(int32(0)), wantLast: at(5 * time.Minute),
			now: 11 * time.Minute},
		{name: "all pods idle, the agent is reaped past the latest report plus idleTimeout",
			st:          omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{entry("pod-a", 0, 2*time.Minute), entry("pod-b", 0, time.Minute)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", 0, 2*time.Minute), entry("pod-b", 0, time.Minute)}, wantSessions: ptr(int32(0)), wantLast: at(2 * time.Minute),
			now: 12 * time.Minute, wantReaped: true},
		{name: "lastActivityTime never moves back to an older report",
			st: omniav1.AgentRuntimeStatus{LastActivityTime: at(8 * time.Minute), ActiveSessions: ptr(int32(0)),
				FacadeReports: []omniav1.FacadeReport{entry("pod-a", 0, time.Minute)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", 0, time.Minute)}, wantSessions: ptr(int32(0)), wantLast: at(8 * time.Minute),
			now: 12 * time.Minute},
		{name: "once every entry is gone the sum is zero",
			st:          omniav1.AgentRuntimeStatus{ActiveSessions: ptr(int32(4)), FacadeReports: []omniav1.FacadeReport{entry("pod-a", 4, 0)}},
			pods:        map[string]bool{},
			wantReports: nil, wantSessions: ptr(int32(0)), wantLast: at(0),
			now: 10 * time.Minute, wantReaped: true},
		{name: "a sum written by anyone but the controller is replaced by the entries' sum",
			st:          omniav1.AgentRuntimeStatus{ActiveSessions: ptr(int32(7))},
			pods:        both,
			wantReports: nil, wantSessions: ptr(int32(0)),
			now: 10 * time.Minute, wantReaped: true},
		{name: "without any report the aggregate stays unset",
			st:   omniav1.AgentRuntimeStatus{},
			pods: both,
			now:  10 * time.Minute, wantReaped: true},
		{name: "a report dated in the future counts as activity now, not then",
			st: omniav1.AgentRuntimeStatus{LastActivityTime: at(30 * 24 * time.Hour),
				FacadeReports: []omniav1.FacadeReport{entry("pod-a", 0, 48*time.Hour)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", 0, 48*time.Hour)}, wantSessions: ptr(int32(0)), wantLast: at(11 * time.Minute),
			now: 11 * time.Minute},
		{name: "a sum past the int32 range is capped, not wrapped to a negative",
			st: omniav1.AgentRuntimeStatus{FacadeReports: []omniav1.FacadeReport{
				entry("pod-a", math.MaxInt32, 0), entry("pod-b", math.MaxInt32, 0)}},
			pods:        both,
			wantReports: []omniav1.FacadeReport{entry("pod-a", math.MaxInt32, 0), entry("pod-b", math.MaxInt32, 0)}, wantSessions: ptr(int32(math.MaxInt32)), wantLast: at(0),
			now: 24 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st.DeepCopy()
			foldReports(st, tc.pods, metav1.NewTime(t0.Add(tc.now)))
			if !equality.Semantic.DeepEqual(st.FacadeReports, tc.wantReports) {
				t.Errorf("facadeReports %+v; want %+v", st.FacadeReports, tc.wantReports)
			}
			if !equality.Semantic.DeepEqual(st.ActiveSessions, tc.wantSessions) {
				t.Errorf("activeSessions %v; want %v", deref(st.ActiveSessions), deref(tc.wantSessions))
			}
			if !equality.Semantic.DeepEqual(st.LastActivityTime, tc.wantLast) {
				t.Errorf("lastActivityTime %v; want %v", st.LastActivityTime, tc.wantLast)
			}
			st.Conditions = []metav1.Condition{running}
			spec := &omniav1.AgentRuntimeSpec{IdleTimeout: &metav1.Duration{Duration: 10 * time.Minute}}
			if d := decideIdle(1, nil, spec, st, t0.Add(tc.now)); d.Reaped != tc.wantReaped {
				t.Errorf("reaped %v at +%s (decision %+v); want %v", d.Reaped, tc.now, d, tc.wantReaped)
			}
		})
	}
}

// TestAgentOfPod: a pod maps to the agent its instance label names, only
// when it is an agent pod.
func TestAgentOfPod(t *testing.T) {
	pod := func(l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-abc", Labels: l}}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []reconcile.Request
	}{
		{"an agent pod maps to its agent", pod(SelectorLabels("agent")),
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "agent"}}}},
		{"a candidate pod maps to its agent", pod(objectLabels("agent")),
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "agent"}}}},
		{"a pod of another app maps to nothing", pod(map[string]string{LabelInstance: "agent", LabelName: "other"}), nil},
		{"an agent pod without an instance maps to nothing", pod(map[string]string{LabelName: AgentAppName}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := agentOfPod(context.Background(), c.pod); !equality.Semantic.DeepEqual(got, c.want) {
				t.Fatalf("got %v; want %v", got, c.want)
			}
		})
	}
	t.Run("the cache keeps exactly the agent pods", func(t *testing.T) {
		if !kubeutil.AgentPodSelector().Matches(labels.Set(SelectorLabels("x"))) {
			t.Fatal("the pod cache's selector does not select an agent pod")
		}
		if kubeutil.AgentPodSelector().Matches(labels.Set(map[string]string{LabelInstance: "x"})) {
			t.Fatal("the pod cache's selector selects a pod of another app")
		}
	})
}
