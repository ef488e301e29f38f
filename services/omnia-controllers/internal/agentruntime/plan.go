package agentruntime

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// This file holds what decide returns (plan and its writes) and the
// decider's bookkeeping. decide cannot know whether a write will succeed,
// yet what comes after a write depends on it (a refused rollout write
// falls back to the stable spec, a refused Deployment write fails the
// agent). So it plans every write assuming success and reads the outcomes
// of the writes already made from the snapshot: the reconciler makes the
// writes, records each outcome in order, and calls decide again until a
// plan has no write left to make (apply.go).

// op is the API call a write makes.
type op int

const (
	// opCreate creates obj.
	opCreate op = iota + 1
	// opUpdate updates obj, an object the agent owns.
	opUpdate
	// opDelete deletes obj, guarded by preconditions.
	opDelete
	// opUpdateAgent writes obj's spec and annotations onto the agent as
	// the pass last wrote it, so its resourceVersion is current.
	opUpdateAgent
	// opRecordStatus writes obj's status before the pass acts on what it
	// records (a promotion); unlike the pass's final status write it is
	// not skipped on a conflict.
	opRecordStatus
)

func (o op) String() string {
	switch o {
	case opCreate:
		return "create"
	case opUpdate:
		return "update"
	case opDelete:
		return "delete"
	case opUpdateAgent:
		return "update agent"
	case opRecordStatus:
		return "record status"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// write is one API call of a plan, with the object as it is sent: owner
// reference and applied hash stamped, a live object's owned fields
// replaced.
type write struct {
	op  op
	obj client.Object
	// preconditions guard a delete (nil: none).
	preconditions *metav1.Preconditions
	// background deletes with background propagation.
	background bool
}

// outcome is what the API server answered to a write: the object as it
// came back (a create's defaults filled in) and the error, unwrapped.
type outcome struct {
	obj client.Object
	err error
}

// question is something decide needs to know that no object holds: the
// reconciler answers it (snapshot.analysis, snapshot.keySet) and decides
// again. Exactly one field is set.
type question struct {
	// analysis is a rollout step's analysis to run.
	analysis *omniav1.RolloutAnalysisStep
	// issuer is the OIDC issuer whose key set to fetch.
	issuer string
	// slices is the Service whose EndpointSlices to list from the API
	// server (the cache holds only the activator's).
	slices string
}

// note is an event to emit and the action it records.
type note struct {
	action string
	kubeutil.Event
}

// logLine is a failure worth a log line that the pass neither returns
// nor records anywhere else in full.
type logLine struct {
	msg string
	err error
}

// plan is decide's answer: the writes to make in order, or a question to
// answer first; once every write is made, the status to write and what
// the pass returns.
type plan struct {
	// writes are the pass's writes in order, those already made (their
	// outcomes are in snapshot.done) first.
	writes []write
	// ask, when set, must be answered before anything after the writes
	// is decided; the fields below are then unset.
	ask *question
	// status is the status to write at the end; nil writes none.
	status *omniav1.AgentRuntimeStatus
	// events are emitted before the status is written.
	events []note
	// logs are logged before the status is written.
	logs []logLine
	// requeueAfter is the pass's timer; 0 for none.
	requeueAfter time.Duration
	// err is returned, with a failed status write joined to it.
	err error
	// retry is returned when the status write succeeds: a missing
	// reference, retried with backoff.
	retry error
	// rolledBack says the pass rolled the rollout's candidate back (its
	// spec write was made), for omnia_rollouts_finished_total.
	rolledBack bool
}

// decider builds one plan. It never changes the snapshot.
type decider struct {
	s *snapshot
	// a is the agent as the plan's writes so far leave it (a rollout's
	// spec writes), a copy of the snapshot's.
	a  *omniav1.AgentRuntime
	st *omniav1.AgentRuntimeStatus
	t  metav1.Time
	p  plan
}

func newDecider(s *snapshot) *decider {
	a := s.in.Agent.DeepCopy()
	st := a.Status.DeepCopy()
	st.ObservedGeneration = a.Generation
	return &decider{s: s, a: a, st: st, t: s.now}
}

// do plans w and returns its outcome: the recorded one when the
// reconciler already made w, else success with w.obj as sent.
func (d *decider) do(w write) outcome {
	i := len(d.p.writes)
	d.p.writes = append(d.p.writes, w)
	if i < len(d.s.done) {
		return d.s.done[i]
	}
	return outcome{obj: w.obj}
}

// asked reports whether the plan stops at a question.
func (d *decider) asked() bool { return d.p.ask != nil }

// end closes the plan: the status to write (nil for none) and the
// pass's result.
func (d *decider) end(st *omniav1.AgentRuntimeStatus, requeueAfter time.Duration, err, retry error) {
	d.p.status, d.p.requeueAfter, d.p.err, d.p.retry = st, requeueAfter, err, retry
}

// set records one condition of the agent at this pass's generation and
// time, reporting whether it changed.
func (d *decider) set(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return kubeutil.SetCondition(&d.st.Conditions, d.s.in.Agent.Generation, d.t, typ, status, reason, msg)
}

func (d *decider) emit(action, typ, reason, msg string) {
	d.p.events = append(d.p.events, note{action: action, Event: kubeutil.Event{Type: typ, Reason: reason, Message: msg}})
}

func (d *decider) warn(action, reason, msg string) {
	d.emit(action, corev1.EventTypeWarning, reason, msg)
}

// own stamps a desired object with the agent as its controller and, when
// spec is not nil, the applied-hash annotation of its labels and spec,
// which it returns.
func (d *decider) own(obj client.Object, spec any) string {
	obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(d.s.in.Agent, omniav1.GroupVersion.WithKind("AgentRuntime"))})
	if spec == nil {
		return ""
	}
	h := AppliedHash(struct {
		Labels map[string]string
		Spec   any
	}{obj.GetLabels(), spec})
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = h
	obj.SetAnnotations(ann)
	return h
}

// controls reports whether the agent controls a live object.
func (d *decider) controls(obj metav1.Object) bool { return metav1.IsControlledBy(obj, d.s.in.Agent) }

// updateAgent plans a write of the agent's spec or metadata (the rollout
// engine's writes), made by edit on the agent as the plan's writes so far
// leave it; what names the write in its error. After a failed write the
// rest of the plan works from the agent as it was.
func (d *decider) updateAgent(what string, edit func(*omniav1.AgentRuntime)) error {
	upd := d.a.DeepCopy()
	edit(upd)
	if o := d.do(write{op: opUpdateAgent, obj: upd}); o.err != nil {
		return fmt.Errorf("%s of AgentRuntime %s/%s: %w", what, d.a.Namespace, d.a.Name, o.err)
	}
	d.a = upd
	return nil
}

// recordStatus plans the write of the status as it stands, before the
// pass acts on what it records (a promotion).
func (d *decider) recordStatus() error {
	upd := d.a.DeepCopy()
	upd.Status = *d.st.DeepCopy()
	if o := d.do(write{op: opRecordStatus, obj: upd}); o.err != nil {
		return fmt.Errorf("record status of AgentRuntime %s/%s: %w", d.a.Namespace, d.a.Name, o.err)
	}
	d.a = upd
	return nil
}
