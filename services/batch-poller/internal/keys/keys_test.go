package keys

import (
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/testenv"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

const secretValue = "sk-very-secret-value-123"

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// eventually retries f until it returns nil or the informer had ample time.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSourceReadsAgentSecretsOfEachNamespace(t *testing.T) {
	ctx := t.Context()
	withKey, noKey, noSecret := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	for _, s := range []*corev1.Secret{
		secret(withKey, "agent-secrets", map[string]string{"ANTHROPIC_API_KEY": secretValue, "MY_KEY": "custom"}),
		secret(noKey, "agent-secrets", map[string]string{"OTHER": secretValue}),
		// Same key in a Secret of another name: must not be used.
		secret(noSecret, "not-agent-secrets", map[string]string{"ANTHROPIC_API_KEY": secretValue}),
	} {
		if _, err := env.Kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := New(env.Kube)
	src.Start(ctx)
	if !src.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("cache never synced")
	}
	eventually(t, func() error { _, err := src.Key(ctx, withKey, "MY_KEY"); return err })
	cases := []struct {
		name, ns, key string
		want          string
		code          codes.Code
		mention       []string
	}{
		{"the default variable name is read from agent-secrets", withKey, DefaultKeyName(batchv1.Provider_PROVIDER_ANTHROPIC), secretValue, codes.OK, nil},
		{"a key the run names is read from agent-secrets", withKey, "MY_KEY", "custom", codes.OK, nil},
		{"a missing key is a failed precondition naming Secret and key", noKey, "OPENAI_API_KEY", "", codes.FailedPrecondition, []string{noKey, "agent-secrets", "OPENAI_API_KEY"}},
		{"a missing Secret is a failed precondition naming namespace and Secret", noSecret, "ANTHROPIC_API_KEY", "", codes.FailedPrecondition, []string{noSecret, "agent-secrets"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := src.Key(ctx, tc.ns, tc.key)
			if status.Code(err) != tc.code || got != tc.want {
				t.Fatalf("Key = %q, %v; want %q, %v", got, err, tc.want, tc.code)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if strings.Contains(msg, secretValue) {
				t.Errorf("error reveals the key value: %s", msg)
			}
			for _, m := range tc.mention {
				if !strings.Contains(msg, m) {
					t.Errorf("error %q does not name %q", msg, m)
				}
			}
		})
	}
	t.Run("a Secret created a moment ago is read before the cache has it", func(t *testing.T) {
		fresh := env.Namespace(t)
		if _, err := env.Kube.CoreV1().Secrets(fresh).Create(ctx, secret(fresh, "agent-secrets", map[string]string{"GEMINI_API_KEY": "sk-fresh"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := src.Key(ctx, fresh, "GEMINI_API_KEY"); err != nil || got != "sk-fresh" {
			t.Errorf("Key right after create = %q, %v", got, err)
		}
	})
	t.Run("a key added later is seen without a restart", func(t *testing.T) {
		s := secret(noKey, "agent-secrets", map[string]string{"OPENAI_API_KEY": "sk-late"})
		if _, err := env.Kube.CoreV1().Secrets(noKey).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() error { _, err := src.Key(ctx, noKey, "OPENAI_API_KEY"); return err })
	})
}

func TestDefaultKeyName(t *testing.T) {
	cases := []struct {
		name string
		p    batchv1.Provider
		want string
	}{
		{"anthropic runs read ANTHROPIC_API_KEY", batchv1.Provider_PROVIDER_ANTHROPIC, "ANTHROPIC_API_KEY"},
		{"openai runs read OPENAI_API_KEY", batchv1.Provider_PROVIDER_OPENAI, "OPENAI_API_KEY"},
		{"gemini runs read GEMINI_API_KEY", batchv1.Provider_PROVIDER_GEMINI, "GEMINI_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultKeyName(tc.p); got != tc.want {
				t.Errorf("got %q", got)
			}
		})
	}
}

// TestSourceOfListedNamespacesReadsNoOther: with namespaces given, a key
// of any other namespace is refused without a read, even where an
// agent-secrets exists.
func TestSourceOfListedNamespacesReadsNoOther(t *testing.T) {
	ctx := t.Context()
	listed, other := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{listed, other} {
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, secret(ns, "agent-secrets", map[string]string{"ANTHROPIC_API_KEY": secretValue}),
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := New(env.Kube, listed, listed)
	src.Start(ctx)
	if !src.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("cache never synced")
	}
	eventually(t, func() error { _, err := src.Key(ctx, listed, "ANTHROPIC_API_KEY"); return err })
	cases := []struct {
		name, ns string
		code     codes.Code
	}{
		{"a listed namespace's key is read", listed, codes.OK},
		{"another namespace's key is refused, naming the flag", other, codes.FailedPrecondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := src.Key(ctx, tc.ns, "ANTHROPIC_API_KEY")
			if status.Code(err) != tc.code || (err != nil && !strings.Contains(err.Error(), "--secret-namespaces")) {
				t.Errorf("err = %v, want %v", err, tc.code)
			}
		})
	}
}
