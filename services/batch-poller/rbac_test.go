package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/rbacaudit"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
)

// sysNS is the install's namespace: deploy/ binds the ServiceAccount there.
const sysNS = "agentplane-system"

// installDeployRBAC creates deploy/batch-poller/rbac.yaml until the test
// ends and returns its objects.
func installDeployRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot, "deploy", "batch-poller", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := rbacaudit.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rbacaudit.Install(t, env.Client, sysNS, objs)
	return objs
}

// secretsIn creates agent-secrets and another Secret in a new namespace.
func secretsIn(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	for name, data := range map[string]map[string]string{
		"agent-secrets":   {"ANTHROPIC_API_KEY": "sk-batch"},
		"database-secret": {"password": "not-for-batch-poller"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// secretReads are the Secret reads an attacker holding batch-poller's
// token would try, and the one read batch-poller needs, in namespace ns.
func secretReads(kube kubernetes.Interface, ns string) map[string]func() error {
	ctx := context.Background()
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	return map[string]func() error{
		"get agent-secrets": func() error {
			_, err := kube.CoreV1().Secrets(ns).Get(ctx, "agent-secrets", metav1.GetOptions{})
			return err
		},
		"list agent-secrets by its name": func() error {
			_, err := kube.CoreV1().Secrets(ns).List(ctx, byName("agent-secrets"))
			return err
		},
		"get another Secret": func() error {
			_, err := kube.CoreV1().Secrets(ns).Get(ctx, "database-secret", metav1.GetOptions{})
			return err
		},
		"list another Secret by its name": func() error {
			_, err := kube.CoreV1().Secrets(ns).List(ctx, byName("database-secret"))
			return err
		},
		"list every Secret of the namespace": func() error {
			_, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"list every Secret of the cluster": func() error {
			_, err := kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			return err
		},
		"write agent-secrets": func() error {
			_, err := kube.CoreV1().Secrets(ns).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-secrets"}},
				metav1.UpdateOptions{})
			return err
		},
	}
}

// TestRBACReachesAgentSecretsOnly runs batch-poller's key cache as its
// ServiceAccount with the RBAC deploy/ ships (every namespace's
// agent-secrets) and with the chart's secretNamespaces shape (a
// RoleBinding of the same ClusterRole in each listed namespace), and tries
// every other Secret read: each is refused with 403.
func TestRBACReachesAgentSecretsOnly(t *testing.T) {
	objs := installDeployRBAC(t)
	var role string
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" {
			role = o.GetName()
		}
	}
	asSA, err := kubernetes.NewForConfig(rbacaudit.AsServiceAccount(env.Config, sysNS, "batch-poller"))
	if err != nil {
		t.Fatal(err)
	}
	listed, unlisted := secretsIn(t), secretsIn(t)
	allowed := map[string]bool{"get agent-secrets": true, "list agent-secrets by its name": true}

	t.Run("deploy/: agent-secrets of every namespace, no other Secret", func(t *testing.T) {
		src := keys.New(asSA)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src.Start(ctx)
		if !src.WaitForSync(ctx, 30*time.Second) {
			t.Fatal("the key cache never synced as the ServiceAccount")
		}
		for _, ns := range []string{listed, unlisted} {
			if k, err := src.Key(ctx, ns, "ANTHROPIC_API_KEY"); err != nil || k != "sk-batch" {
				t.Errorf("key of %s = %q, %v", ns, k, err)
			}
			for read, do := range secretReads(asSA, ns) {
				checkRead(t, read, do(), allowed[read])
			}
		}
	})

	t.Run("secretNamespaces: agent-secrets of the listed namespaces only", func(t *testing.T) {
		// Without the cluster-wide binding, as the chart renders it.
		if err := env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: listed, Name: "batch-poller"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sysNS, Name: "batch-poller"}}}
		if _, err := env.Kube.RbacV1().RoleBindings(listed).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// RBAC sees a binding come or go a moment after the API does.
		testenv.Eventually(t, 10*time.Second, "the cluster-wide binding gone", func() error {
			_, err := asSA.CoreV1().Secrets(unlisted).Get(context.Background(), "agent-secrets", metav1.GetOptions{})
			if !apierrors.IsForbidden(err) {
				return fmt.Errorf("get agent-secrets of an unlisted namespace: %w", err)
			}
			return nil
		})
		src := keys.New(asSA, listed)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src.Start(ctx)
		if !src.WaitForSync(ctx, 30*time.Second) {
			t.Fatal("the key cache of the listed namespace never synced as the ServiceAccount")
		}
		if k, err := src.Key(ctx, listed, "ANTHROPIC_API_KEY"); err != nil || k != "sk-batch" {
			t.Errorf("key of the listed namespace = %q, %v", k, err)
		}
		if _, err := src.Key(ctx, unlisted, "ANTHROPIC_API_KEY"); err == nil {
			t.Error("a key of an unlisted namespace was served")
		}
		for read, do := range secretReads(asSA, listed) {
			checkRead(t, "listed namespace: "+read, do(), allowed[read])
		}
		for read, do := range secretReads(asSA, unlisted) {
			checkRead(t, "unlisted namespace: "+read, do(), false)
		}
	})
}

// checkRead fails unless err is nil for an allowed read and 403 for any
// other.
func checkRead(t *testing.T, read string, err error, allowed bool) {
	t.Helper()
	switch {
	case allowed && err != nil:
		t.Errorf("%s: %v, want it allowed", read, err)
	case !allowed && !apierrors.IsForbidden(err):
		t.Errorf("%s: err = %v, want 403", read, err)
	}
}
