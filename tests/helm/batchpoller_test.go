package helm

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/rbacaudit"
)

// batchTokenFile is where the agent-controller chart mounts its token
// for batch-poller.
const batchTokenFile = "/var/run/secrets/agentplane/batch-poller/token"

// TestBatchPollerCallersAndSecretsRender: batch-poller admits only the
// agent-controller ServiceAccount of the release, which the
// agent-controller chart gives a projected token for batch-poller's
// audience; batch-poller's RBAC reaches only agent-secrets, in the listed
// namespaces when there are some (docs/batch-poller.md).
func TestBatchPollerCallersAndSecretsRender(t *testing.T) {
	const ac, bp = "agent-controller", "batch-poller"
	cases := []rule{
		{name: "batch-poller: only the release's agent-controller ServiceAccount may call by default", chart: bp, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, bp, "--allowed-callers=system:serviceaccount:"+releaseNS+":agent-controller")
			wantNoFlag(t, r, bp, "--token-audience", "--secret-namespaces")
		}},
		{name: "batch-poller: auth values reach their flags", chart: bp,
			values: "auth: {tokenAudience: aud, allowedCallers: ['system:serviceaccount:ops:ctl', 'system:serviceaccount:ops:ctl2']}",
			check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, bp, "--token-audience=aud", "--allowed-callers=system:serviceaccount:ops:ctl,system:serviceaccount:ops:ctl2")
			}},
		{name: "batch-poller: without secretNamespaces agent-secrets of every namespace, and no other Secret", chart: bp, check: func(t *testing.T, r *rendered) {
			rules := rulesOf(t, r.get(t, "ClusterRole", "", releaseNS+"-"+bp))
			if len(rules) != 1 || fmt.Sprint(rules[0]["resourceNames"]) != "[agent-secrets]" || fmt.Sprint(rules[0]["verbs"]) != "[get list watch]" {
				t.Errorf("rules %v", rules)
			}
			r.get(t, "ClusterRoleBinding", "", releaseNS+"-"+bp)
			wantNone(t, r, "RoleBinding")
		}},
		{name: "batch-poller: secretNamespaces bind agent-secrets in each listed namespace and nowhere else", chart: bp,
			values: "secretNamespaces: [team-a, team-b]", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, bp, "--secret-namespaces=team-a,team-b")
				wantAbsent(t, r, "ClusterRoleBinding", "", releaseNS+"-"+bp)
				for _, ns := range []string{"team-a", "team-b"} {
					rb := r.get(t, "RoleBinding", ns, releaseNS+"-"+bp)
					wantField(t, rb.Object, "ClusterRole", "roleRef", "kind")
					wantField(t, rb.Object, releaseNS+"-"+bp, "roleRef", "name")
					wantField(t, rb.Object, releaseNS, "subjects", "0", "namespace")
				}
			}},
		{name: "agent-controller: batch on mounts a projected token for batch-poller's audience and reads it", chart: ac,
			values: "batch: {enabled: true}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--batch-poller-token-file="+batchTokenFile)
				spec := podSpec(t, r, ac)
				wantField(t, spec, "batch-poller-token", "volumes", "0", "name")
				src := field(t, spec, "volumes", "0", "projected", "sources", "0", "serviceAccountToken").(map[string]any)
				wantField(t, src, "agentplane-batch-poller", "audience")
				wantField(t, src, 3600, "expirationSeconds")
				wantField(t, src, "token", "path")
				wantField(t, r.container(t, ac), "/var/run/secrets/agentplane/batch-poller", "volumeMounts", "0", "mountPath")
			}},
		{name: "agent-controller: batch.tokenAudience sets the projected token's audience", chart: ac,
			values: "batch: {enabled: true, tokenAudience: aud}", check: func(t *testing.T, r *rendered) {
				wantField(t, podSpec(t, r, ac), "aud", "volumes", "0", "projected", "sources", "0", "serviceAccountToken", "audience")
			}},
		{name: "agent-controller: batch off mounts no token", chart: ac, check: func(t *testing.T, r *rendered) {
			wantNoFlag(t, r, ac, "--batch-poller-token-file")
			if _, ok := podSpec(t, r, ac)["volumes"]; ok {
				t.Error("volumes rendered")
			}
		}},
		{name: "agentplane: the umbrella passes secretNamespaces to batch-poller", chart: umbrella,
			values: "global: {batch: {enabled: true}}\nbatch-poller: {secretNamespaces: [team-a]}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, bp, "--secret-namespaces=team-a", "--allowed-callers=system:serviceaccount:"+releaseNS+":agent-controller")
				wantArgs(t, r, ac, "--batch-poller-token-file="+batchTokenFile)
				r.get(t, "RoleBinding", "team-a", releaseNS+"-"+bp)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, mustRender(t, tc.chart, tc.values)) })
	}
}

// TestBatchPollerRBACWithSecretNamespacesReachesNothingElse installs the
// chart's RBAC for one listed namespace and, as batch-poller's
// ServiceAccount, tries every Secret read around the one it needs: each
// is refused with 403.
func TestBatchPollerRBACWithSecretNamespacesReachesNothingElse(t *testing.T) {
	env := cluster(t)
	ctx := context.Background()
	listed, unlisted := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{listed, unlisted} {
		for _, name := range []string{"agent-secrets", "database-secret"} {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}
			if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r := mustRender(t, "batch-poller", "secretNamespaces: ["+listed+"]")
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		for _, o := range r.ofKind(kind) {
			o := o.DeepCopy()
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("create %s %s: %v", kind, o.GetName(), err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
	}
	asSA, err := kubernetes.NewForConfig(rbacaudit.AsServiceAccount(env.Config, releaseNS, "batch-poller"))
	if err != nil {
		t.Fatal(err)
	}
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	secrets := asSA.CoreV1().Secrets
	// RBAC sees the new binding a moment after the API does.
	testenv.Eventually(t, 10*time.Second, "the RoleBinding in effect", func() error {
		_, err := secrets(listed).Get(ctx, "agent-secrets", metav1.GetOptions{})
		return err
	})
	cases := []struct {
		name    string
		read    func() error
		allowed bool
	}{
		{"get agent-secrets of the listed namespace is allowed", func() error {
			_, err := secrets(listed).Get(ctx, "agent-secrets", metav1.GetOptions{})
			return err
		}, true},
		{"watch-style list of agent-secrets of the listed namespace is allowed", func() error {
			_, err := secrets(listed).List(ctx, byName("agent-secrets"))
			return err
		}, true},
		{"get another Secret of the listed namespace is refused", func() error {
			_, err := secrets(listed).Get(ctx, "database-secret", metav1.GetOptions{})
			return err
		}, false},
		{"list every Secret of the listed namespace is refused", func() error {
			_, err := secrets(listed).List(ctx, metav1.ListOptions{})
			return err
		}, false},
		{"get agent-secrets of an unlisted namespace is refused", func() error {
			_, err := secrets(unlisted).Get(ctx, "agent-secrets", metav1.GetOptions{})
			return err
		}, false},
		{"list agent-secrets across the cluster is refused", func() error {
			_, err := secrets(metav1.NamespaceAll).List(ctx, byName("agent-secrets"))
			return err
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read()
			switch {
			case tc.allowed && err != nil:
				t.Errorf("err = %v, want allowed", err)
			case !tc.allowed && !apierrors.IsForbidden(err):
				t.Errorf("err = %v, want 403", err)
			}
		})
	}
}
