package promptpack

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "promptpack"

// Reconciler reconciles PromptPacks.
type Reconciler struct {
	// Client reads through the manager's cache (with the index package's
	// field indexes) and writes to the API server.
	Client client.Client
	// Recorder emits the validation events.
	Recorder events.EventRecorder
	// Validator checks pack.json; NewSchemaValidator in production.
	Validator Validator
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// sources keeps what earlier passes read of unchanged ConfigMaps;
	// SetupWithManager makes it, and without it every pass reads its
	// ConfigMap live.
	sources *sourceMemo
}

// Reconcile validates one PromptPack and ranks it among its siblings.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pack := &omniav1.PromptPack{}
	if ok, err := kubeutil.Live(ctx, r.Client, req.NamespacedName, pack); !ok {
		if err == nil {
			// Gone or being deleted: its series goes with it.
			metrics.DeletePromptPack(req.Namespace, req.Name)
		}
		return reconcile.Result{}, err
	}
	// The gauge shows the validation stored when the pass ends, however it
	// ends.
	valid := metrics.PromptPackValidated(pack.Status.Conditions)
	defer func() { metrics.SetPromptPackValid(req.Namespace, req.Name, valid) }()
	if err := r.stampLabel(ctx, pack); err != nil {
		return reconcile.Result{}, err
	}
	snap, err := r.snapshot(ctx, pack)
	if err != nil {
		return reconcile.Result{}, err
	}
	before := slices.Clone(pack.Status.Conditions)
	d := Decide(snap, r.Validator)
	kubeutil.Emit(r.Recorder, pack, "Validate", d.Events)
	if d.Changed {
		pack.Status = d.Status
		switch err := r.Client.Status().Update(ctx, pack); {
		case err == nil:
			valid = metrics.PromptPackValidated(d.Status.Conditions)
			metrics.CountPromptPackFailures(req.Namespace, req.Name, before, d.Status.Conditions)
		case kubeutil.IgnoreConflict(err) != nil:
			return reconcile.Result{}, fmt.Errorf("write status of PromptPack %s: %w", req, err)
		}
	}
	// d.Retry is a missing ConfigMap: returning it makes controller-runtime
	// retry with backoff, on top of the ConfigMap watch.
	return reconcile.Result{}, d.Retry
}

// stampLabel keeps the pack-name label, the index agents and tools select
// versions by, equal to spec.packName (which is immutable, so this writes
// once per object). Where the install's label policy runs (a
// MutatingAdmissionPolicy, Kubernetes 1.36 and later) the API server has
// stamped it already and this writes nothing: a pack then costs one write,
// its status.
func (r *Reconciler) stampLabel(ctx context.Context, pack *omniav1.PromptPack) error {
	if pack.Labels[omniav1.LabelPromptPack] == pack.Spec.PackName {
		return nil
	}
	patch := client.MergeFrom(pack.DeepCopy())
	if pack.Labels == nil {
		pack.Labels = map[string]string{}
	}
	pack.Labels[omniav1.LabelPromptPack] = pack.Spec.PackName
	if err := r.Client.Patch(ctx, pack, patch); err != nil {
		return fmt.Errorf("label PromptPack %s/%s: %w", pack.Namespace, pack.Name, err)
	}
	return nil
}

func (r *Reconciler) snapshot(ctx context.Context, pack *omniav1.PromptPack) (Snapshot, error) {
	s := Snapshot{Pack: pack, Now: kubeutil.PassTime(r.Now)}
	if ref := pack.Spec.Source.ConfigMapRef; ref != nil && pack.Spec.Source.Type == omniav1.SourceTypeConfigMap {
		src, err := r.sources.read(ctx, r.Client, types.NamespacedName{Namespace: pack.Namespace, Name: ref.Name}, r.Validator)
		if err != nil {
			return s, err
		}
		s.Source = &src
	}
	var sibs omniav1.PromptPackList
	if err := r.Client.List(ctx, &sibs, client.InNamespace(pack.Namespace), client.MatchingFields{index.PackName: pack.Spec.PackName}); err != nil {
		return s, fmt.Errorf("list versions of pack %s/%s: %w", pack.Namespace, pack.Spec.PackName, err)
	}
	s.Siblings = sibs.Items
	var agents omniav1.AgentRuntimeList
	if err := r.Client.List(ctx, &agents, client.InNamespace(pack.Namespace), client.MatchingFields{index.AgentPromptPack: pack.Spec.PackName}); err != nil {
		return s, fmt.Errorf("list AgentRuntimes of pack %s/%s: %w", pack.Namespace, pack.Spec.PackName, err)
	}
	s.Agents = agents.Items
	for _, ref := range pack.Spec.Skills {
		if _, seen := s.SkillSources[ref.Source]; seen {
			continue
		}
		if s.SkillSources == nil {
			s.SkillSources = map[string]*omniav1.SkillSource{}
		}
		src := &omniav1.SkillSource{}
		found, err := kubeutil.Get(ctx, r.Client, types.NamespacedName{Namespace: pack.Namespace, Name: ref.Source}, src)
		if err != nil {
			return s, err
		}
		if !found {
			src = nil // looked up: absent
		}
		s.SkillSources[ref.Source] = src
	}
	return s, nil
}

// SetupWithManager wires the controller: PromptPacks, the ConfigMaps they
// read, phase changes of sibling versions, the SkillSources their skills
// resolve against and the AgentRuntimes counted by AgentsNotified. One
// worker (docs/omnia-controllers.md): sibling ranking reads the phases
// other passes write. rec, when not nil, is called instead of r (tests wrap r to
// count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	// The cache answers for ConfigMaps' metadata: the watch below keeps
	// that informer.
	r.sources = newSourceMemo(mgr.GetCache())
	packs := func() client.ObjectList { return &omniav1.PromptPackList{} }
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.PromptPack{}, Workers: 1}.Builder(mgr).
		// Metadata only: the cache never holds a ConfigMap's data
		// (kubeutil.ApplyCacheOptions); a pass reads its one ConfigMap live
		// unless the metadata shows it unchanged since a pass read it.
		WatchesMetadata(&corev1.ConfigMap{}, kubeutil.EnqueueByIndex(r.Client, packs, index.ConfigMapRef)).
		Watches(&omniav1.PromptPack{}, handler.EnqueueRequestsFromMapFunc(r.olderSiblings),
			builder.WithPredicates(PhaseChanged())).
		Watches(&omniav1.AgentRuntime{}, handler.EnqueueRequestsFromMapFunc(r.packsForAgent),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&omniav1.SkillSource{}, kubeutil.EnqueueByIndex(r.Client, packs, index.PackSkillSource))
	return kubeutil.Complete(b, r, rec)
}

// olderSiblings maps a version whose phase changed to the siblings it may
// now supersede (or stop superseding): those of lower or equal precedence.
func (r *Reconciler) olderSiblings(ctx context.Context, o client.Object) []reconcile.Request {
	changed, ok := o.(*omniav1.PromptPack)
	if !ok {
		return nil
	}
	var packs omniav1.PromptPackList
	if err := r.Client.List(ctx, &packs, client.InNamespace(changed.Namespace), client.MatchingFields{index.PackName: changed.Spec.PackName}); err != nil {
		log.FromContext(ctx).Error(err, "map PromptPack to siblings", "promptPack", client.ObjectKeyFromObject(o))
		return nil
	}
	return requests(packs.Items, func(p *omniav1.PromptPack) bool {
		return p.Name != changed.Name && Older(p, changed)
	})
}

func (r *Reconciler) packsForAgent(ctx context.Context, o client.Object) []reconcile.Request {
	ar, ok := o.(*omniav1.AgentRuntime)
	if !ok {
		return nil
	}
	var packs omniav1.PromptPackList
	if err := r.Client.List(ctx, &packs, client.InNamespace(ar.Namespace), client.MatchingFields{index.PackName: ar.Spec.PromptPackRef.Name}); err != nil {
		log.FromContext(ctx).Error(err, "map AgentRuntime to PromptPacks", "agentRuntime", client.ObjectKeyFromObject(o))
		return nil
	}
	return requests(packs.Items, nil)
}

func requests(packs []omniav1.PromptPack, keep func(*omniav1.PromptPack) bool) []reconcile.Request {
	var out []reconcile.Request
	for i := range packs {
		if keep == nil || keep(&packs[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&packs[i])})
		}
	}
	return out
}

// PhaseChanged passes creations, deletions and updates that change
// status.phase; writes that only touch lastUpdated or conditions do not
// re-enqueue siblings.
func PhaseChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*omniav1.PromptPack)
			n, okN := e.ObjectNew.(*omniav1.PromptPack)
			return okO && okN && o.Status.Phase != n.Status.Phase
		},
	}
}
