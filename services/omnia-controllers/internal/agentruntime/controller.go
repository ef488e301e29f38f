package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "agentruntime"

// Reconciler reconciles AgentRuntimes.
type Reconciler struct {
	// Client reads through the manager's cache (with the index package's
	// field indexes) and writes to the API server.
	Client client.Client
	// Recorder emits Warning events.
	Recorder events.EventRecorder
	// Config is what the operator adds to every agent.
	Config Config
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// JWKSFetcher reads the key sets of OIDC issuers for the JWKS mirror;
	// an oidc.Fetcher with its defaults when nil.
	JWKSFetcher *oidc.Fetcher
	// Metrics runs rollout analysis queries; nil when the operator has no
	// Prometheus, and analysis steps then hold.
	Metrics MetricsQuerier
}

// Reconcile resolves one agent's inputs and, once all are usable, writes
// its Deployment, Service and HPA, runs its rollout, mirrors its OIDC keys
// and applies its idle deadline. Success is requeued only for the timers
// seed 003 lists: rollout steps and analysis, the OIDC key refresh and the
// idle deadline.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	a := &omniav1.AgentRuntime{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if a.DeletionTimestamp != nil {
		// Owned objects go with the agent through their owner references.
		return reconcile.Result{}, r.setFinalizer(ctx, a, false)
	}
	if err := r.setFinalizer(ctx, a, true); err != nil {
		return reconcile.Result{}, err
	}
	in, err := r.inputs(ctx, a)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	st := a.Status.DeepCopy()
	st.ObservedGeneration = a.Generation
	t := metav1.NewTime(now().Truncate(time.Second))
	res := Resolve(in, &st.Conditions, t)
	for _, e := range res.Events {
		kubeutil.Emit(r.Recorder, a, "Resolve", []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: e.Reason, Message: e.Message}})
	}
	if !res.Usable {
		// Build nothing from a half-resolved spec; an existing Deployment
		// keeps serving what it was built from.
		st.Phase = res.Phase
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "waiting for the agent's inputs")
		if err := r.writeStatus(ctx, a, st); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, res.Retry
	}

	image, err := RuntimeImage(a, r.Config)
	if err != nil {
		// A spec or operator configuration problem: a retry reads the same
		// and fails the same, so wait for an edit.
		msg := err.Error()
		if kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionFrameworkReady, metav1.ConditionFalse, omniav1.ReasonFrameworkImageUnavailable, msg) {
			kubeutil.Emit(r.Recorder, a, "Resolve", []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: omniav1.EventFrameworkImageUnavailable, Message: msg}})
		}
		st.Phase = omniav1.AgentRuntimePhasePending
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "no runtime image")
		return reconcile.Result{}, r.writeStatus(ctx, a, st)
	}
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionFrameworkReady, metav1.ConditionTrue, omniav1.ReasonFrameworkImageResolved, image)

	// The idle deadline may delete the agent or hold it at zero replicas.
	idle, err := r.idleDeadline(ctx, a, st, t)
	if err != nil || idle.Deleted {
		return reconcile.Result{}, err
	}
	want, err := BuildDeployment(in, res, r.Config, image)
	if err != nil {
		// A spec problem (the agent's volumes): the same spec fails the
		// same way, so wait for an edit; a Deployment already running keeps
		// what it was built from.
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionDeploymentReady, metav1.ConditionFalse, omniav1.ReasonVolumesInvalid, err.Error())
		st.Phase = omniav1.AgentRuntimePhaseFailed
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "the Deployment cannot be built: "+err.Error())
		return reconcile.Result{}, r.writeStatus(ctx, a, st)
	}
	if idle.ScaleToZero {
		want.Spec.Replicas = ptr(int32(0))
	}
	// The rollout engine runs the candidate Deployment and may change the
	// stable one's replicas (replica-weighted traffic) or end the pass
	// after a spec write of its own (a version trigger, a promotion). It
	// works on a copy: when it fails, the stable Deployment is applied all
	// the same, at the count the spec gives it (the candidate may not be
	// serving), and the failure is recorded in RolloutActive and returned
	// after the status write.
	split := want.DeepCopy()
	ro, roErr := r.rollout(ctx, a, in, res, image, split, st, t)
	if roErr != nil {
		r.rolloutFailed(a, st, roErr, t)
	} else {
		want = split
		if ro.Done {
			return reconcile.Result{RequeueAfter: ro.RequeueAfter}, r.writeStatus(ctx, a, st)
		}
	}

	dep, err := r.applyDeployment(ctx, a, want, autoscalerFloor(in))
	if transientAPIError(err) {
		// Not a problem with the spec: the phase stands and
		// controller-runtime retries with backoff.
		if roErr == nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, joinStatus(errors.Join(roErr, err), r.writeStatus(ctx, a, st))
	}
	if err != nil {
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionDeploymentReady, metav1.ConditionFalse, omniav1.ReasonDeploymentFailed, err.Error())
		st.Phase = omniav1.AgentRuntimePhaseFailed
		return reconcile.Result{}, joinStatus(errors.Join(roErr, err), r.writeStatus(ctx, a, st))
	}
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionDeploymentReady, metav1.ConditionTrue, omniav1.ReasonDeploymentCreated, "Deployment "+dep.Name)
	svc := BuildService(a)
	if err := r.applyService(ctx, a, svc); transientAPIError(err) {
		if roErr == nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, joinStatus(errors.Join(roErr, err), r.writeStatus(ctx, a, st))
	} else if err != nil {
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionServiceReady, metav1.ConditionFalse, omniav1.ReasonServiceFailed, err.Error())
		st.Phase = omniav1.AgentRuntimePhaseFailed
		return reconcile.Result{}, joinStatus(errors.Join(roErr, err), r.writeStatus(ctx, a, st))
	}
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionServiceReady, metav1.ConditionTrue, omniav1.ReasonServiceCreated, "Service "+svc.Name)
	st.ServiceEndpoint = fmt.Sprintf("%s.%s.svc.cluster.local:%d", a.Name, a.Namespace, primaryPort(a))
	// An HPA failure is in AutoscalingReady; the pass goes on so the
	// status that shows it is written.
	hpaErr := r.autoscaling(ctx, in, st, t)

	jwksAfter, jwksErr := r.mirrorJWKS(ctx, a, st, t)

	st.ActiveVersion = ptr(res.Pack.Spec.Version)
	desired := int32(0)
	if dep.Spec.Replicas != nil {
		desired = *dep.Spec.Replicas
	}
	st.Replicas = &omniav1.ReplicaStatus{Desired: desired, Ready: dep.Status.ReadyReplicas, Available: dep.Status.AvailableReplicas}
	if dep.Status.ReadyReplicas > 0 {
		st.Phase = omniav1.AgentRuntimePhaseRunning
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonRuntimeReady,
			fmt.Sprintf("%d of %d replica(s) ready", dep.Status.ReadyReplicas, desired))
	} else {
		st.Phase = omniav1.AgentRuntimePhasePending
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "no replica is ready yet")
	}
	if idle.ScaleToZero {
		holdAtZero(a, st, t)
	}
	// Failures that did not stop the pass: the rollout engine's, the
	// HPA's, a transient one of the key mirror, and a missing candidate
	// input (the stable side is applied above). Each is in a condition;
	// the status is written, then controller-runtime retries with backoff.
	if err := errors.Join(roErr, hpaErr, jwksErr, ro.Retry); err != nil {
		return reconcile.Result{}, joinStatus(err, r.writeStatus(ctx, a, st))
	}
	// Timers only where seed 003 lists them: rollout steps and analysis,
	// the OIDC key refresh, the idle deadline.
	return reconcile.Result{RequeueAfter: soonest(idle.RequeueAfter, ro.RequeueAfter, jwksAfter)}, r.writeStatus(ctx, a, st)
}

// soonest is the smallest positive duration, 0 when none is positive.
func soonest(ds ...time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}

func joinStatus(err, statusErr error) error {
	if statusErr != nil {
		return fmt.Errorf("%w (and writing status: %v)", err, statusErr)
	}
	return err
}

// setFinalizer adds or removes the agent's finalizer. The merge patch
// carries the whole finalizer list as this pass read it, so it would
// drop a finalizer another actor added since; the optimistic lock
// (resourceVersion in the patch) turns that race into a conflict, retried
// with backoff on a fresh read.
func (r *Reconciler) setFinalizer(ctx context.Context, a *omniav1.AgentRuntime, want bool) error {
	if controllerutil.ContainsFinalizer(a, omniav1.AgentRuntimeFinalizer) == want {
		return nil
	}
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(a, omniav1.AgentRuntimeFinalizer)
	} else {
		controllerutil.RemoveFinalizer(a, omniav1.AgentRuntimeFinalizer)
	}
	if err := r.Client.Patch(ctx, a, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("update finalizer of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	return nil
}

// inputs reads every referenced object. Only API failures are errors here;
// what is missing is judged by Resolve.
func (r *Reconciler) inputs(ctx context.Context, a *omniav1.AgentRuntime) (Inputs, error) {
	in := Inputs{Agent: a, Providers: map[string]*omniav1.Provider{}, Secrets: map[string]*corev1.Secret{}}
	var packs omniav1.PromptPackList
	if err := r.Client.List(ctx, &packs, client.InNamespace(a.Namespace), client.MatchingFields{index.PackName: a.Spec.PromptPackRef.Name}); err != nil {
		return in, fmt.Errorf("list PromptPacks %s/%s: %w", a.Namespace, a.Spec.PromptPackRef.Name, err)
	}
	in.Packs = packs.Items
	if ref := a.Spec.ToolRegistryRef; ref != nil && (ref.Namespace == nil || *ref.Namespace == "" || *ref.Namespace == a.Namespace) {
		tr := &omniav1.ToolRegistry{}
		if found, err := r.get(ctx, a.Namespace, ref.Name, tr); err != nil {
			return in, err
		} else if found {
			in.Registry = tr
		}
	}
	for _, e := range a.Spec.Providers {
		if e.ProviderRef.Namespace != nil && *e.ProviderRef.Namespace != "" && *e.ProviderRef.Namespace != a.Namespace {
			continue // refused by Resolve; never read across namespaces
		}
		p := &omniav1.Provider{}
		found, err := r.get(ctx, a.Namespace, e.ProviderRef.Name, p)
		if err != nil {
			return in, err
		}
		key := ProviderKey(a, e.ProviderRef)
		if !found {
			in.Providers[key] = nil
			continue
		}
		in.Providers[key] = p
		if c := p.Spec.Credential; c != nil && c.SecretRef != nil {
			s := &corev1.Secret{}
			if found, err := r.get(ctx, a.Namespace, c.SecretRef.Name, s); err != nil {
				return in, err
			} else if found {
				in.Secrets[c.SecretRef.Name] = s
			}
		}
	}
	// Most namespaces have no Workspace; none found is not an error. The
	// index is on the cluster-scoped Workspaces' spec.namespace.name.
	var wss omniav1.WorkspaceList
	if err := r.Client.List(ctx, &wss, client.MatchingFields{index.WorkspaceNamespace: a.Namespace}); err != nil {
		return in, fmt.Errorf("list Workspaces of namespace %s: %w", a.Namespace, err)
	}
	in.Workspace = NamespaceWorkspace(wss.Items)
	return in, nil
}

func (r *Reconciler) get(ctx context.Context, ns, name string, obj client.Object) (bool, error) {
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("get %T %s/%s: %w", obj, ns, name, err)
}

func (r *Reconciler) writeStatus(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus) error {
	if equality.Semantic.DeepEqual(a.Status, *st) {
		return nil
	}
	a.Status = *st
	if err := r.Client.Status().Update(ctx, a); kubeutil.IgnoreConflict(err) != nil {
		return fmt.Errorf("write status of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	return nil
}

// recordStatus writes the status before the pass acts on what it
// records (a promotion). Unlike writeStatus it returns a conflict too: the
// record must be stored before the action it announces is taken. a is
// left as it was when the write fails.
func (r *Reconciler) recordStatus(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus) error {
	upd := a.DeepCopy()
	upd.Status = *st.DeepCopy()
	if err := r.Client.Status().Update(ctx, upd); err != nil {
		return fmt.Errorf("record status of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	*a = *upd
	return nil
}

// updateSpec writes a change of the agent's own spec or metadata (the
// rollout engine's writes). The change is made on a copy, so a failed
// write leaves a as read and the rest of the pass works from that.
func (r *Reconciler) updateSpec(ctx context.Context, a *omniav1.AgentRuntime, mutate func(*omniav1.AgentRuntime)) error {
	upd := a.DeepCopy()
	mutate(upd)
	if err := r.Client.Update(ctx, upd); err != nil {
		return err
	}
	*a = *upd
	return nil
}

// stamp sets the owner reference and the applied-hash annotation of a
// desired object and returns the hash.
func (r *Reconciler) stamp(a *omniav1.AgentRuntime, obj client.Object, spec any) (string, error) {
	if err := controllerutil.SetControllerReference(a, obj, r.Client.Scheme()); err != nil {
		return "", fmt.Errorf("own %T: %w", obj, err)
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
	return h, nil
}

// applyDeployment creates the Deployment or, when the desired state's hash
// differs from the one last applied or the live object drifted from it
// (deploymentDrifted: an edit by someone else), replaces the fields the
// controller owns. An unchanged desired state on an unedited Deployment
// is not written at all, so the pod template (and its hash) is touched
// only when an input changed. floor is the count an autoscaled Deployment
// found at zero is raised to (replicasToWrite).
func (r *Reconciler) applyDeployment(ctx context.Context, a *omniav1.AgentRuntime, want *appsv1.Deployment, floor int32) (*appsv1.Deployment, error) {
	h, err := r.stamp(a, want, want.Spec)
	if err != nil {
		return nil, err
	}
	live := &appsv1.Deployment{}
	found, err := r.get(ctx, want.Namespace, want.Name, live)
	if err != nil {
		return nil, err
	}
	if !found {
		if err := r.Client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create Deployment %s/%s: %w", want.Namespace, want.Name, err)
		}
		return want, nil
	}
	if !metav1.IsControlledBy(live, a) {
		return nil, notOwned(live)
	}
	replicas := replicasToWrite(want.Spec.Replicas, live.Spec.Replicas, floor)
	if live.Annotations[AnnotationAppliedHash] == h && !deploymentDrifted(want, live, replicas) {
		return live, nil
	}
	live.Labels = mergeMap(live.Labels, want.Labels)
	live.Annotations = mergeMap(live.Annotations, want.Annotations)
	live.OwnerReferences = want.OwnerReferences
	live.Spec.Template = want.Spec.Template
	if replicas != nil {
		live.Spec.Replicas = replicas // otherwise the autoscaler's count stands
	}
	if err := r.Client.Update(ctx, live); err != nil {
		return nil, fmt.Errorf("update Deployment %s/%s: %w", live.Namespace, live.Name, err)
	}
	return live, nil
}

func (r *Reconciler) applyService(ctx context.Context, a *omniav1.AgentRuntime, want *corev1.Service) error {
	h, err := r.stamp(a, want, want.Spec)
	if err != nil {
		return err
	}
	live := &corev1.Service{}
	found, err := r.get(ctx, want.Namespace, want.Name, live)
	switch {
	case err != nil:
		return err
	case !found:
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("create Service %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	case !metav1.IsControlledBy(live, a):
		return notOwned(live)
	case live.Annotations[AnnotationAppliedHash] == h && !serviceDrifted(want, live):
		return nil
	}
	live.Labels = mergeMap(live.Labels, want.Labels)
	live.Annotations = mergeMap(live.Annotations, want.Annotations)
	live.OwnerReferences = want.OwnerReferences
	live.Spec.Ports, live.Spec.Selector, live.Spec.Type = want.Spec.Ports, want.Spec.Selector, want.Spec.Type
	if err := r.Client.Update(ctx, live); err != nil {
		return fmt.Errorf("update Service %s/%s: %w", live.Namespace, live.Name, err)
	}
	return nil
}

// autoscaling writes or removes the HPA of the agent's effective policy
// (its own, else its Workspace service group's) and sets AutoscalingReady.
// A failure is recorded in that condition and returned, for the caller to
// write the status and retry with backoff; an HPA of the agent's name that
// the agent does not control is refused, never taken over.
func (r *Reconciler) autoscaling(ctx context.Context, in Inputs, st *omniav1.AgentRuntimeStatus, t metav1.Time) error {
	a := in.Agent
	set := func(status metav1.ConditionStatus, reason, msg string) {
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionAutoscalingReady, status, reason, msg)
	}
	fail := func(err error) error {
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalingError, err.Error())
		return err
	}
	want := BuildHPA(in)
	live := &autoscalingv2.HorizontalPodAutoscaler{}
	found, err := r.get(ctx, a.Namespace, a.Name, live)
	if err != nil {
		return err
	}
	if want == nil {
		if found && metav1.IsControlledBy(live, a) {
			if err := r.Client.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
				return fail(fmt.Errorf("delete HorizontalPodAutoscaler %s/%s: %w", a.Namespace, a.Name, err))
			}
		}
		if autoscaled(in) {
			set(metav1.ConditionFalse, omniav1.ReasonKEDANotInstalled, "autoscaling type keda is not supported by this operator")
		} else {
			meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionAutoscalingReady)
		}
		return nil
	}
	h, err := r.stamp(a, want, want.Spec)
	if err != nil {
		return err
	}
	switch {
	case !found:
		err = r.Client.Create(ctx, want)
	case !metav1.IsControlledBy(live, a):
		err := notOwned(live)
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalerNotOwned, err.Error())
		return err
	case live.Annotations[AnnotationAppliedHash] != h || hpaDrifted(want, live):
		live.Labels = mergeMap(live.Labels, want.Labels)
		live.Annotations = mergeMap(live.Annotations, want.Annotations)
		live.OwnerReferences = want.OwnerReferences
		live.Spec = want.Spec
		err = r.Client.Update(ctx, live)
	}
	if err != nil {
		return fail(fmt.Errorf("write HorizontalPodAutoscaler %s/%s: %w", a.Namespace, a.Name, err))
	}
	set(metav1.ConditionTrue, omniav1.ReasonScaling, fmt.Sprintf("HorizontalPodAutoscaler %s scales %d to %d replicas", a.Name, *want.Spec.MinReplicas, want.Spec.MaxReplicas))
	return nil
}

// notOwned refuses to take over an object of the same name that someone
// else created: overwriting it could break whatever owns it.
func notOwned(obj client.Object) error {
	return fmt.Errorf("%T %s/%s exists and is not controlled by this AgentRuntime", obj, obj.GetNamespace(), obj.GetName())
}

func mergeMap(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// transientAPIError reports an API failure a retry may not meet again
// (unavailable, throttled, timed out, internal, a conflict), as opposed to
// a refusal that needs an edit (an object someone else owns, an invalid
// one). Only the latter fails the AgentRuntime. AlreadyExists is a
// conflict too: the create followed a cache read that had not yet seen
// the object, and the retry reads it and judges ownership then.
func transientAPIError(err error) bool {
	return err != nil && (apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err) ||
		apierrors.IsAlreadyExists(err) || apierrors.IsUnexpectedServerError(err))
}
