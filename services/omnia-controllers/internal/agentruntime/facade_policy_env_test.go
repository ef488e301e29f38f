package agentruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// serviceAccountClient is a client authenticated by a token the API
// server issues for ServiceAccount ns/name: bound to pod when pod is not
// nil, as the kubelet mounts it (the API server then names the pod in the
// request's user info), else bound to nothing.
func serviceAccountClient(t *testing.T, ns, name string, pod *corev1.Pod) client.Client {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// patchStatus merge-patches the agent's status through c.
func patchStatus(c client.Client, ns, agent, patch string) error {
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent}}
	return c.Status().Patch(context.Background(), a, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// controllerAccount is a ServiceAccount of another namespace allowed to
// patch every AgentRuntime's status, as the controller's is.
func controllerAccount(t *testing.T) client.Client {
	t.Helper()
	ns := env.Namespace(t)
	name := "omnia-controllers-" + ns
	ctrltest.Create(t, env, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "omnia-controllers"}})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{omniav1.GroupVersion.Group}, Resources: []string{"agentruntimes/status"}, Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "omnia-controllers"}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	return serviceAccountClient(t, ns, "omnia-controllers", nil)
}

// TestFacadeReportPolicyBindsAnEntryToItsPod: with the policy the install
// ships, a facade's token bound to its pod writes that pod's entry of
// status.facadeReports and nothing else of its agent's status. Each write
// a compromised pod could make with its token is refused, as is any write
// with a token of the namespace not bound to a pod; a ServiceAccount of
// another namespace (the controller's) is not constrained.
func TestFacadeReportPolicyBindsAnEntryToItsPod(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	startAll(t)
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
	}))
	names := agentPods(t, ns, "agent", 2)
	mine, theirs := &corev1.Pod{}, names[1]
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: names[0]}, mine); err != nil {
		t.Fatal(err)
	}
	unbound := facadeClient(t, ns, "agent") // waits for the controller to make the account
	pod := serviceAccountClient(t, ns, FacadeRBACName("agent"), mine)
	now := time.Now()
	// The other pod reports first (an administrator's client writes its
	// entry, as its own facade would): the attacks below aim at it.
	if err := applyReport(env.Client, ns, "agent", theirs, 2, now); err != nil {
		t.Fatal(err)
	}
	policy := ctrltest.InstallFacadeReportPolicy(t, env, ns)
	// Refused by the policy, not by RBAC or the schema.
	forbidden := func(err error) error {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy.Name) {
			return fmt.Errorf("got %w, want Forbidden by %s", err, policy.Name)
		}
		return nil
	}

	t.Run("every expression type-checks against the AgentRuntime schema", func(t *testing.T) {
		// A type error would leave the expression failing on every write;
		// a misspelt field under .? the type check lets pass (two absent
		// values compare equal): TestFacadeReportPolicyCoversEveryStatusField
		// and the refusals below catch that.
		ctrltest.Eventually(t, wait, func() error {
			p := &admissionv1.ValidatingAdmissionPolicy{}
			if err := env.Client.Get(ctx, types.NamespacedName{Name: policy.Name}, p); err != nil {
				return err
			}
			if p.Status.TypeChecking == nil {
				return fmt.Errorf("not type-checked yet")
			}
			if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
				t.Fatalf("type-check warnings: %+v", w)
			}
			return nil
		})
	})

	t.Run("a token not bound to a pod cannot write even an entry", func(t *testing.T) {
		// The first refusal is also the sign that the policy is in force.
		ctrltest.Eventually(t, wait, func() error { return forbidden(applyReport(unbound, ns, "agent", mine.Name, 0, now)) })
	})
	t.Run("a token bound to a pod writes that pod's entry", func(t *testing.T) {
		if err := applyReport(pod, ns, "agent", mine.Name, 1, now); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, func() error { // and the controller, not matched, still sums the entries
			a, err := getAgent(ns, "agent")
			if err != nil {
				return err
			}
			if a.Status.ActiveSessions == nil || *a.Status.ActiveSessions != 3 {
				return fmt.Errorf("activeSessions %v, want 3 (1 + 2)", a.Status.ActiveSessions)
			}
			return nil
		})
	})
	future := now.Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		rule string
		do   func() error
	}{
		{"another pod's entry cannot be written", func() error { return applyReport(pod, ns, "agent", theirs, 0, now) }},
		{"another pod's entry cannot be removed", func() error {
			return patchStatus(pod, ns, "agent", fmt.Sprintf(`{"status":{"facadeReports":[{"pod":%q,"activeSessions":1,"lastActivityTime":%q}]}}`,
				mine.Name, now.UTC().Format(time.RFC3339)))
		}},
		{"the aggregate session count cannot be written", func() error {
			return patchStatus(pod, ns, "agent", `{"status":{"activeSessions":0}}`)
		}},
		{"the last activity time cannot be moved", func() error {
			return patchStatus(pod, ns, "agent", fmt.Sprintf(`{"status":{"lastActivityTime":%q}}`, future))
		}},
		{"the phase cannot be written", func() error { return patchStatus(pod, ns, "agent", `{"status":{"phase":"Failed"}}`) }},
		{"the conditions cannot be cleared", func() error { return patchStatus(pod, ns, "agent", `{"status":{"conditions":null}}`) }},
	} {
		t.Run(c.rule, func(t *testing.T) {
			if err := forbidden(c.do()); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("its own entry's time may move, as a report does", func(t *testing.T) {
		if err := applyReport(pod, ns, "agent", mine.Name, 0, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a ServiceAccount of another namespace is not matched", func(t *testing.T) {
		if err := applyReport(controllerAccount(t), ns, "agent", theirs, 0, now); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFacadeReportPolicyCoversEveryStatusField: the policy holds every
// field of the AgentRuntime status but facadeReports as it was, so a field
// added to the status without a line in the policy fails here.
func TestFacadeReportPolicyCoversEveryStatusField(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot, ctrltest.FacadeReportPolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	st := reflect.TypeFor[omniav1.AgentRuntimeStatus]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if name == "facadeReports" {
			continue
		}
		if want := fmt.Sprintf("object.?status.?%s == oldObject.?status.?%s", name, name); !strings.Contains(string(raw), want) {
			t.Errorf("%s does not hold status.%s: no %q", ctrltest.FacadeReportPolicyFile, name, want)
		}
	}
}
