package agentruntime

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// snapshot is everything decide reads: the agent and its references as
// read at the start of the pass, the objects it owns, the answers to
// decide's questions and the outcomes of the writes made so far.
type snapshot struct {
	// in is the agent (in.Agent) and its references.
	in Inputs
	// candidate is the rollout candidate's references, read when the
	// spec has an active rollout; nil otherwise.
	candidate *candidateInputs
	// live are the objects the agent owns, by name.
	live liveObjects
	// cfg is the operator's configuration.
	cfg Config
	// now stamps conditions and times the idle deadline and rollout.
	now metav1.Time
	// kedaServed says the API server serves KEDA's ScaledObject kind.
	kedaServed bool
	// pods are the names of the agent's pods that exist (sessions.go).
	pods map[string]bool

	// analysis answers a question for the current rollout step's
	// analysis; nil until asked.
	analysis *rollout.AnalysisOutcome
	// keySet answers a question for the OIDC issuer's key set; nil until
	// asked.
	keySet *keySetAnswer
	// slices answers a question for the EndpointSlices of the agent's
	// Service; nil until asked.
	slices *slicesAnswer
	// done are the outcomes of the plan's first len(done) writes, in
	// order.
	done []outcome
}

// candidateInputs are the candidate's references (the spec with the
// candidate's overrides), or why they could not be read.
type candidateInputs struct {
	in  Inputs
	err error
}

// keySetAnswer is what the OIDC issuer answered: its key set, or why it
// gave none (a condition message, not a reconcile error: an issuer
// failure waits for the next refresh).
type keySetAnswer struct {
	jwks    []byte
	failure string
}

// slicesAnswer is the EndpointSlices of a Service as the API server
// listed them, or why it could not.
type slicesAnswer struct {
	items []discoveryv1.EndpointSlice
	err   error
}

// liveObjects are the objects of the agent's names. A read failure is
// kept, not returned: the pass judges it where it needs the object, as it
// judges a failed write there.
type liveObjects struct {
	stable    found[*appsv1.Deployment]
	candidate found[*appsv1.Deployment]
	service   found[*corev1.Service]
	hpa       found[*autoscalingv2.HorizontalPodAutoscaler]
	jwks      found[*corev1.Secret]
	// tools is read from the API server: ConfigMaps are never cached.
	// candidateTools is the rollout candidate's own, read the same way
	// and always, not only during a rollout: the one a finished rollout
	// left behind is deleted with the candidate.
	tools          found[*corev1.ConfigMap]
	candidateTools found[*corev1.ConfigMap]
	// scaledObject is the KEDA ScaledObject, read only when the kind is
	// served and watched, or the agent wants one (readScaledObject).
	scaledObject found[*unstructured.Unstructured]
	// facadeSA, facadeRole and facadeBinding are the facade's access
	// (facade_rbac.go); pdb the PodDisruptionBudget (pdb.go).
	facadeSA      found[*corev1.ServiceAccount]
	facadeRole    found[*rbacv1.Role]
	facadeBinding found[*rbacv1.RoleBinding]
	pdb           found[*policyv1.PodDisruptionBudget]
	// activatorSlice routes the Service to the activator (activator.go).
	activatorSlice found[*discoveryv1.EndpointSlice]
}

// found is one object read by name: obj is nil when it does not exist or
// the read failed (err).
type found[T client.Object] struct {
	obj T
	err error
}

// snapshot reads one agent's pass: the references (an API failure ends
// the pass: nothing can be judged without them), the candidate's
// references when a rollout is active, and the owned objects.
func (r *Reconciler) snapshot(ctx context.Context, a *omniav1.AgentRuntime, now metav1.Time) (snapshot, error) {
	s := snapshot{cfg: r.Config, now: now}
	var err error
	if s.in, err = r.inputs(ctx, a); err != nil {
		return s, err
	}
	if rollout.Active(&a.Spec) {
		ca := a.DeepCopy()
		ca.Spec = *rollout.CandidateSpec(&a.Spec)
		in, err := r.inputs(ctx, ca)
		s.candidate = &candidateInputs{in: in, err: err}
	}
	s.live = liveObjects{
		stable:         read(ctx, r, a.Namespace, a.Name, &appsv1.Deployment{}),
		candidate:      read(ctx, r, a.Namespace, a.Name+CandidateSuffix, &appsv1.Deployment{}),
		service:        read(ctx, r, a.Namespace, a.Name, &corev1.Service{}),
		hpa:            read(ctx, r, a.Namespace, a.Name, &autoscalingv2.HorizontalPodAutoscaler{}),
		jwks:           read(ctx, r, a.Namespace, JWKSSecretName(a.Name), &corev1.Secret{}),
		tools:          read(ctx, r, a.Namespace, ToolsConfigMapName(a.Name), &corev1.ConfigMap{}),
		candidateTools: read(ctx, r, a.Namespace, CandidateToolsConfigMapName(a.Name), &corev1.ConfigMap{}),
		facadeSA:       read(ctx, r, a.Namespace, FacadeRBACName(a.Name), &corev1.ServiceAccount{}),
		facadeRole:     read(ctx, r, a.Namespace, FacadeRBACName(a.Name), &rbacv1.Role{}),
		facadeBinding:  read(ctx, r, a.Namespace, FacadeRBACName(a.Name), &rbacv1.RoleBinding{}),
		pdb:            read(ctx, r, a.Namespace, a.Name, &policyv1.PodDisruptionBudget{}),
		activatorSlice: read(ctx, r, a.Namespace, ActivatorSliceName(a.Name), &discoveryv1.EndpointSlice{}),
	}
	if s.live.scaledObject, s.kedaServed, err = r.readScaledObject(ctx, a, kedaWanted(s.in)); err != nil {
		return s, err
	}
	if s.pods, err = r.agentPods(ctx, a); err != nil {
		return s, err
	}
	return s, nil
}

func read[T client.Object](ctx context.Context, r *Reconciler, ns, name string, obj T) found[T] {
	var none T
	ok, err := r.get(ctx, ns, name, obj)
	if err != nil || !ok {
		return found[T]{obj: none, err: err}
	}
	return found[T]{obj: obj}
}

// inputs reads every referenced object. Only API failures are errors here;
// what is missing is judged by Resolve.
func (r *Reconciler) inputs(ctx context.Context, a *omniav1.AgentRuntime) (Inputs, error) {
	in := Inputs{Agent: a, Providers: map[string]*omniav1.Provider{}, Secrets: map[string]*corev1.Secret{}, SkillSources: map[string]*omniav1.SkillSource{}}
	var packs omniav1.PromptPackList
	if err := r.Client.List(ctx, &packs, client.InNamespace(a.Namespace), client.MatchingFields{index.PackName: a.Spec.PromptPackRef.Name}); err != nil {
		return in, fmt.Errorf("list PromptPacks %s/%s: %w", a.Namespace, a.Spec.PromptPackRef.Name, err)
	}
	in.Packs = packs.Items
	if err := r.skillSources(ctx, &in); err != nil {
		return in, err
	}
	if ref := a.Spec.ToolRegistryRef; ref != nil && (ref.Namespace == nil || *ref.Namespace == "" || *ref.Namespace == a.Namespace) {
		tr := &omniav1.ToolRegistry{}
		if found, err := r.get(ctx, a.Namespace, ref.Name, tr); err != nil {
			return in, err
		} else if found {
			in.Registry = tr
		}
	}
	if err := r.toolInputs(ctx, &in); err != nil {
		return in, err
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
		for _, name := range providerSecretNames(&p.Spec) {
			s := &corev1.Secret{}
			if found, err := r.get(ctx, a.Namespace, name, s); err != nil {
				return in, err
			} else if found {
				in.Secrets[name] = s
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
	// Which policy is in force is decided among all of the namespace's
	// (the older wins), so all are read, from the cache.
	var sps omniav1.SessionRetentionPolicyList
	if err := r.Client.List(ctx, &sps, client.InNamespace(a.Namespace)); err != nil {
		return in, fmt.Errorf("list SessionRetentionPolicies of namespace %s: %w", a.Namespace, err)
	}
	in.SessionPolicies = sps.Items
	var mps omniav1.MemoryPolicyList
	if err := r.Client.List(ctx, &mps, client.InNamespace(a.Namespace)); err != nil {
		return in, fmt.Errorf("list MemoryPolicies of namespace %s: %w", a.Namespace, err)
	}
	in.MemoryPolicies = mps.Items
	return in, nil
}

// get reads one object of the agent's namespace; found is false when it
// does not exist.
func (r *Reconciler) get(ctx context.Context, ns, name string, obj client.Object) (bool, error) {
	return kubeutil.Get(ctx, r.Client, types.NamespacedName{Namespace: ns, Name: name}, obj)
}
