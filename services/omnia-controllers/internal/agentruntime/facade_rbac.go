package agentruntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// The facade reports its pod's sessions (its entry of
// status.facadeReports, which the controller sums for the idle deadline,
// sessions.go) by a server-side apply of its own AgentRuntime's status
// with the pod's ServiceAccount token
// (docs/omnia-controllers.md, "Session activity"). Each agent gets a
// ServiceAccount, Role and RoleBinding named <name>-facade for that, and
// nothing more: the Role names the agent itself, so one agent's pod cannot
// touch another's status.

// FacadeRBACName names an agent's facade ServiceAccount, Role and
// RoleBinding.
func FacadeRBACName(agent string) string { return agent + "-facade" }

// FacadeRules are the facade Role's rules: read its own AgentRuntime and
// read and patch its status. The controller holds each of them
// cluster-wide, as Kubernetes requires of whoever writes a Role
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping).
func FacadeRules(agent string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{omniav1.GroupVersion.Group}, Resources: []string{"agentruntimes"}, ResourceNames: []string{agent}, Verbs: []string{"get"}},
		{APIGroups: []string{omniav1.GroupVersion.Group}, Resources: []string{"agentruntimes/status"}, ResourceNames: []string{agent}, Verbs: []string{"get", "patch"}},
	}
}

// podServiceAccount is the ServiceAccount the agent's pods run as:
// podOverrides' › the Workspace runtime defaults' › <name>-facade.
func podServiceAccount(in Inputs) string {
	sa := FacadeRBACName(in.Agent.Name)
	if ws := workspaceRuntime(in); ws != nil && ws.ServiceAccountName != "" {
		sa = ws.ServiceAccountName
	}
	if po := in.Agent.Spec.PodOverrides; po != nil && po.ServiceAccountName != "" {
		sa = po.ServiceAccountName
	}
	return sa
}

// BuildFacadeServiceAccount returns the agent's facade ServiceAccount.
func BuildFacadeServiceAccount(a *omniav1.AgentRuntime) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: FacadeRBACName(a.Name), Namespace: a.Namespace, Labels: objectLabels(a.Name)},
	}
}

// BuildFacadeRole returns the agent's facade Role (FacadeRules).
func BuildFacadeRole(a *omniav1.AgentRuntime) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: FacadeRBACName(a.Name), Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Rules:      FacadeRules(a.Name),
	}
}

// BuildFacadeRoleBinding binds the facade Role to the ServiceAccount the
// pods run as (podServiceAccount), so the facade can report activity
// whichever account an override names.
func BuildFacadeRoleBinding(in Inputs) *rbacv1.RoleBinding {
	a := in.Agent
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: FacadeRBACName(a.Name), Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: FacadeRBACName(a.Name)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: podServiceAccount(in), Namespace: a.Namespace}},
	}
}

// facadeAccess plans the writes of the facade ServiceAccount, Role and
// RoleBinding, before the Deployment: a pod naming a ServiceAccount that
// does not exist yet is refused.
func (d *decider) facadeAccess() error {
	in := d.s.in
	live := d.s.live
	sa := BuildFacadeServiceAccount(in.Agent)
	if err := d.keepOwned(sa, struct{}{}, liveOf(live.facadeSA), false, func(upd client.Object) {}); err != nil {
		return err
	}
	role := BuildFacadeRole(in.Agent)
	roleDrift := live.facadeRole.obj != nil && !equality.Semantic.DeepEqual(live.facadeRole.obj.Rules, role.Rules)
	if err := d.keepOwned(role, role.Rules, liveOf(live.facadeRole), roleDrift, func(upd client.Object) {
		upd.(*rbacv1.Role).Rules = role.Rules
	}); err != nil {
		return err
	}
	rb := BuildFacadeRoleBinding(in)
	lrb := live.facadeBinding.obj
	if lrb != nil && lrb.RoleRef != rb.RoleRef && d.controls(lrb) {
		// roleRef cannot be changed: the binding is replaced, and the
		// next pass creates it anew.
		if o := d.do(write{op: opDelete, obj: lrb.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
			return fmt.Errorf("delete RoleBinding %s/%s: %w", lrb.Namespace, lrb.Name, o.err)
		}
		return nil
	}
	rbDrift := lrb != nil && !equality.Semantic.DeepEqual(lrb.Subjects, rb.Subjects)
	return d.keepOwned(rb, struct {
		R rbacv1.RoleRef
		S []rbacv1.Subject
	}{rb.RoleRef, rb.Subjects}, liveOf(live.facadeBinding), rbDrift, func(upd client.Object) {
		upd.(*rbacv1.RoleBinding).Subjects = rb.Subjects
	})
}

// liveOf turns a found object into a client.Object, nil (untyped) when
// absent, and its read error.
func liveOf[T client.Object](f found[T]) liveRead {
	var none T
	if any(f.obj) == any(none) {
		return liveRead{err: f.err}
	}
	return liveRead{obj: f.obj, err: f.err}
}

// liveRead is one owned object as read: obj nil when absent.
type liveRead struct {
	obj client.Object
	err error
}

// keepOwned plans the create or repair of one owned object, as service
// does the Service's: created when missing, refused when someone else
// controls it, updated when its applied hash differs from want's or
// drifted says the live one was edited. set copies want's owned fields
// onto the update (labels, annotations and owner references are copied
// here).
func (d *decider) keepOwned(want client.Object, spec any, live liveRead, drifted bool, set func(upd client.Object)) error {
	h := d.own(want, spec)
	kind := want.GetObjectKind().GroupVersionKind().Kind
	switch {
	case live.err != nil:
		return live.err
	case live.obj == nil:
		if o := d.do(write{op: opCreate, obj: want}); o.err != nil {
			return fmt.Errorf("create %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), o.err)
		}
		return nil
	case !d.controls(live.obj):
		return notOwned(live.obj)
	case live.obj.GetAnnotations()[AnnotationAppliedHash] == h && !drifted && labelsCovered(want.GetLabels(), live.obj.GetLabels()):
		return nil
	}
	upd := live.obj.DeepCopyObject().(client.Object)
	upd.SetLabels(mergeMap(upd.GetLabels(), want.GetLabels()))
	upd.SetAnnotations(mergeMap(upd.GetAnnotations(), want.GetAnnotations()))
	upd.SetOwnerReferences(want.GetOwnerReferences())
	set(upd)
	if o := d.do(write{op: opUpdate, obj: upd}); o.err != nil {
		return fmt.Errorf("update %s %s/%s: %w", kind, upd.GetNamespace(), upd.GetName(), o.err)
	}
	return nil
}
