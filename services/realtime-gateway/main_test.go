package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/testbin"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

var (
	env *testenv.Env
	// supervisorBin and mockDir are built once per package.
	supervisorBin, mockDir, agentctlBin string
	// testKey is the shared key, held in the key Secret of gwNamespace.
	testKey = bytes.Repeat([]byte("s"), realtime.MinKeyBytes)
)

// gwNamespace plays agentplane-system: the gateway's ServiceAccount and
// the shared key Secret live there.
const gwNamespace = "agentplane-system"

func TestMain(m *testing.M) {
	testbin.Main("realtime-gateway-test-", func(dir string) int {
		supervisorBin = filepath.Join(dir, "supervisor")
		mockDir = filepath.Join(dir, "mock")
		agentctlBin = filepath.Join(dir, "agentctl")
		if err := testbin.Build(
			[]string{"build", "-C", "../supervisor", "-o", supervisorBin, "."},
			testbin.MockAgent("../../tools", dir),
			[]string{"build", "-C", "../../tools", "-o", agentctlBin, "./agentctl"},
		); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := testbin.InstallMocks(dir, mockDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The gateway's informers log through controller-runtime; the
		// tests read the gateway's own slog lines instead.
		ctrllog.SetLogger(logr.Discard())
		defer gatewayBin.Remove()
		return testenv.Run(m, &env, testenv.Options{})
	})
}

var (
	platformOnce sync.Once
	gatewayREST  *rest.Config
	platformErr  error
)

// platform installs, once, what a cluster running the gateway has: its
// namespace, the shared key Secret, and the gateway's ServiceAccount with
// the RBAC of deploy/realtime-gateway/rbac.yaml, applied as shipped. The
// gateway under test runs as that ServiceAccount, so a permission missing
// from the manifest fails these tests.
func platform(t *testing.T) *rest.Config {
	t.Helper()
	platformOnce.Do(func() { gatewayREST, platformErr = installPlatform() })
	if platformErr != nil {
		t.Fatalf("platform: %v", platformErr)
	}
	return gatewayREST
}

func installPlatform() (*rest.Config, error) {
	ctx := context.Background()
	k := env.Kube
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName}, Data: map[string][]byte{realtime.KeySecretKey: testKey}}
	if _, err := k.CoreV1().Secrets(gwNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot, "deploy", "realtime-gateway", "rbac.yaml"))
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, err
		}
		var err error
		switch meta.Kind {
		case "ServiceAccount":
			o := &corev1.ServiceAccount{}
			if err = yaml.UnmarshalStrict([]byte(doc), o); err == nil {
				_, err = k.CoreV1().ServiceAccounts(gwNamespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case "ClusterRole":
			o := &rbacv1.ClusterRole{}
			if err = yaml.UnmarshalStrict([]byte(doc), o); err == nil {
				_, err = k.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			}
		case "ClusterRoleBinding":
			o := &rbacv1.ClusterRoleBinding{}
			if err = yaml.UnmarshalStrict([]byte(doc), o); err == nil {
				_, err = k.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			}
		case "Role":
			o := &rbacv1.Role{}
			if err = yaml.UnmarshalStrict([]byte(doc), o); err == nil {
				_, err = k.RbacV1().Roles(gwNamespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case "RoleBinding":
			o := &rbacv1.RoleBinding{}
			if err = yaml.UnmarshalStrict([]byte(doc), o); err == nil {
				_, err = k.RbacV1().RoleBindings(gwNamespace).Create(ctx, o, metav1.CreateOptions{})
			}
		default:
			err = fmt.Errorf("unexpected kind %q in rbac.yaml", meta.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("apply %s from rbac.yaml: %w", meta.Kind, err)
		}
	}
	tok, err := saToken(ctx, gwNamespace, "realtime-gateway")
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: env.Config.Host, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, QPS: 100, Burst: 200}, nil
}

// saToken issues a token of ServiceAccount namespace/name for audiences
// (none: the apiserver's own, a plain API token), as a pod of it would
// hold.
func saToken(ctx context.Context, namespace, name string, audiences ...string) (string, error) {
	tr, err := env.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600), Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// caller creates ServiceAccount name in ns and returns its token for the
// gateway's audience, as agentctl --service-account requests it; with
// verbs it is also granted those verbs on agents/prompt there, through the
// Role docs/realtime-gateway.md shows.
func caller(t *testing.T, ns, name string, verbs ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(verbs) > 0 {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name + "-prompt"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"agents.re-cinq.com"}, Resources: []string{"agents/prompt"}, Verbs: verbs,
		}}}
		if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-prompt"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := saToken(ctx, ns, name, config.DefaultTokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
