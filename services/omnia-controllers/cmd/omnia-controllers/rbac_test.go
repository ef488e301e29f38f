package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
)

// installRBAC creates what deploy/omnia-controllers/rbac.yaml declares, in
// the namespace the kustomize install puts it in.
func installRBAC(t *testing.T, ns string) {
	t.Helper()
	raw, err := os.ReadFile("../../../../deploy/omnia-controllers/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			obj.SetNamespace(ns)
		}
		// Tests share the control plane: a second test finds the install
		// in place.
		if err := env.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// installedSA is the config of the install's ServiceAccount, with exactly
// the permissions deploy/ grants it, in the namespace the kustomize
// install uses.
func installedSA(t *testing.T) *rest.Config {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	installRBAC(t, sysNS)
	asSA := rest.CopyConfig(env.Config)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + sysNS + ":omnia-controllers",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sysNS, "system:authenticated"},
	}
	return asSA
}

// runInstalled runs the binary as the install's ServiceAccount, electing
// on the Lease leaseID, and waits until every cache synced. stop ends the
// run and fails t when it ended with an error.
func runInstalled(t *testing.T, leaseID string, extra ...string) (ctx context.Context, stop func()) {
	t.Helper()
	args := append([]string{"--leader-election-namespace=" + sysNS, "--leader-election-id=" + leaseID, "--shutdown-timeout=5s",
		"--provider-credential-probe=false"}, extra...)
	cfg, ctx, cancel, done := startRun(t, installedSA(t), args...)
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	synced := false
	defer func() {
		if !synced { // eventually failed the test: stop the run before the test ends
			stop()
		}
	}()
	eventually(t, "readyz as the ServiceAccount (every cache synced)", answersOK("http://"+cfg.HealthProbeBindAddress+"/readyz"))
	synced = true
	return ctx, stop
}

// sysNS is the namespace of the kustomize install.
const sysNS = "agentplane-system"

// TestInstalledRBACIsEnough runs the binary's manager as the install's
// ServiceAccount, with exactly the permissions deploy/ grants it: the
// caches must sync (list and watch on every kind), the Lease must be taken,
// and an agent must get from its pack and Provider to a Deployment and a
// Service. A missing permission shows up as a cache that never syncs or a
// write that is refused.
func TestInstalledRBACIsEnough(t *testing.T) {
	_, activatorPort, err := net.SplitHostPort(testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := runInstalled(t, "omnia-rbac-test", "--activator-address=10.0.0.7", "--activator-port="+activatorPort)
	defer stop()

	ns := env.Namespace(t)
	pack := `{"id":"support","name":"Support","version":"1.0.0","template_engine":{"version":"v1","syntax":"{{v}}"},` +
		`"prompts":{"default":{"id":"default","name":"Default","version":"1.0.0","system_template":"You help."}}}`
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "support-1", Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: pack}},
		&omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "support-1", Namespace: ns}, Spec: omniav1.PromptPackSpec{PackName: "support", Version: "1.0.0",
			Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: "support-1"}}}},
		&omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns}, Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock}},
		&omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}, Spec: omniav1.AgentRuntimeSpec{
			PromptPackRef: omniav1.PromptPackRef{Name: "support"},
			Facades:       []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}},
			Providers:     []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}}}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	eventually(t, "the agent's Deployment and Service written as the ServiceAccount", func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bot"}, &appsv1.Deployment{}); err != nil {
			return err
		}
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bot"}, &corev1.Service{})
	})
	// The activator (listening on every interface; the address is only
	// what slices would name) reads the agent, its Service and its slice as the
	// ServiceAccount: a refusal would be a 503, not the 421 of an agent
	// that is up.
	eventually(t, "the activator refuses, as the ServiceAccount, an agent it does not serve", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+activatorPort+"/", nil)
		if err != nil {
			return err
		}
		req.Host = "bot." + ns + ".svc"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			return fmt.Errorf("activator answered %d; want 421", resp.StatusCode)
		}
		return nil
	})
	eventually(t, "the agent's status written", func() error {
		a := &omniav1.AgentRuntime{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bot"}, a); err != nil {
			return err
		}
		if a.Status.Phase != omniav1.AgentRuntimePhasePending || a.Status.ActiveVersion == nil {
			return fmt.Errorf("phase %q, activeVersion %v", a.Status.Phase, a.Status.ActiveVersion)
		}
		return nil
	})
}
