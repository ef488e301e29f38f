package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// tokenValue is the credential in the Connection's Secret; it must show
// up nowhere the controllers write.
const tokenValue = "ghp_e2e-s3cr3t-0123456789"

// TestSandboxedRegistryConditions runs the binary as the install's
// ServiceAccount and builds a ToolRegistry whose sandboxed handler uses a
// SandboxClass (on a RuntimeClass) and a Connection, governed by a
// ToolPolicy. Nothing but the ToolPolicy, SandboxClass and Connection
// controllers writes those three objects' status, so the registry's
// PolicyBound and SandboxesValid become True only through them; its
// SandboxConnectionsValid is False (ConnectionNotReady) while the
// Connection's Secret is missing and becomes True once the Secret is
// created, with no other change and no restart. A policy broken by an
// edit unbinds the registry. The Secret's value appears in no status and
// no event.
func TestSandboxedRegistryConditions(t *testing.T) {
	ctx, stop := runInstalled(t, "omnia-sandbox-test")
	defer stop()

	ns := env.Namespace(t)
	rcName := "gvisor-" + ns // cluster-scoped
	handler := omniav1.HandlerDefinition{Name: "fs", Type: omniav1.HandlerTypeMCP,
		MCPConfig: &omniav1.MCPConfig{Transport: omniav1.MCPTransportStdio, Command: "/bin/server"},
		Sandbox:   &omniav1.HandlerSandbox{ClassName: "sandboxed", ConnectionRefs: []omniav1.LocalObjectReference{{Name: "github"}}}}
	policy := &omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard", Namespace: ns}, Spec: omniav1.ToolPolicySpec{
		Selector: omniav1.ToolPolicySelector{Registry: "tools"},
		Rules: []omniav1.ToolPolicyRule{{Name: "no-prod", Deny: omniav1.ToolPolicyDeny{
			CEL: `headers["X-Omnia-Tool-Name"] == "fs" && body.path.startsWith("/prod")`, Message: "not in prod"}}}}}
	for _, o := range []client.Object{
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rcName}, Handler: "runsc"},
		&omniav1.SandboxClass{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed", Namespace: ns}, Spec: omniav1.SandboxClassSpec{
			Image: "sandbox:1", RuntimeClassName: &rcName, AllowedConnections: []omniav1.LocalObjectReference{{Name: "github"}}}},
		&omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns}, Spec: omniav1.ConnectionSpec{
			URL: "https://api.github.com", Credential: &omniav1.ConnectionCredential{SecretRef: omniav1.SecretKeyRef{Name: "gh-token"}}}},
		policy,
		&omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns},
			Spec: omniav1.ToolRegistrySpec{Handlers: []omniav1.HandlerDefinition{handler}}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	key := types.NamespacedName{Namespace: ns, Name: "tools"}
	eventually(t, "PolicyBound and SandboxesValid True; SandboxConnectionsValid False while the Secret is missing", registryConds(ctx, key, map[string]string{
		omniav1.ConditionPolicyBound:             omniav1.ReasonPolicyBound,
		omniav1.ConditionSandboxesValid:          omniav1.ReasonSandboxesValid,
		omniav1.ConditionSandboxConnectionsValid: omniav1.ReasonConnectionNotReady,
	}))
	conn := &omniav1.Connection{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "github"}, conn); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(conn.Status.Conditions, omniav1.ConditionReady); c == nil || c.Reason != omniav1.ReasonSecretNotFound {
		t.Fatalf("Connection Ready = %+v; want SecretNotFound", c)
	}

	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gh-token", Namespace: ns,
		Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, StringData: map[string]string{"token": tokenValue}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SandboxConnectionsValid True once the Secret exists", registryConds(ctx, key, map[string]string{
		omniav1.ConditionPolicyBound:             omniav1.ReasonPolicyBound,
		omniav1.ConditionSandboxesValid:          omniav1.ReasonSandboxesValid,
		omniav1.ConditionSandboxConnectionsValid: omniav1.ReasonConnectionsValid,
	}))

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return err
		}
		policy.Spec.Rules[0].Deny.CEL = "body.path.startsWith("
		return env.Client.Update(ctx, policy)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a policy that no longer compiles unbinds the registry", registryConds(ctx, key, map[string]string{
		omniav1.ConditionPolicyBound: omniav1.ReasonPolicyNotCompiled,
	}))

	var written []any
	for _, l := range []client.ObjectList{&omniav1.ToolRegistryList{}, &omniav1.ConnectionList{}, &omniav1.SandboxClassList{}, &omniav1.ToolPolicyList{}, &eventsv1.EventList{}} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		written = append(written, l)
	}
	out, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tokenValue) {
		t.Fatalf("the Connection's secret value was written to a status or an event:\n%s", out)
	}
}

// registryConds is a condition for eventually: the registry's conditions
// of the given types have the given reasons.
func registryConds(ctx context.Context, key types.NamespacedName, want map[string]string) func() error {
	return func() error {
		tr := &omniav1.ToolRegistry{}
		if err := env.Client.Get(ctx, key, tr); err != nil {
			return err
		}
		for typ, reason := range want {
			if c := meta.FindStatusCondition(tr.Status.Conditions, typ); c == nil || c.Reason != reason {
				return fmt.Errorf("%s = %+v; want reason %s", typ, c, reason)
			}
		}
		return nil
	}
}
