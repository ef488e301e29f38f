package v1alpha1

import (
	"slices"
	"testing"
)

func TestHandlerIsSelfDescribing(t *testing.T) {
	for _, c := range []struct {
		typ          HandlerType
		selfDescribe bool
		explicitTool bool
	}{
		{HandlerTypeHTTP, false, true},
		{HandlerTypeGRPC, false, true},
		{HandlerTypeClient, false, true},
		{HandlerTypeMCP, true, false},
		{HandlerTypeOpenAPI, true, false},
		{HandlerTypePlatform, false, false},
	} {
		t.Run(string(c.typ), func(t *testing.T) {
			h := HandlerDefinition{Name: "h", Type: c.typ}
			if got := h.IsSelfDescribing(); got != c.selfDescribe {
				t.Errorf("IsSelfDescribing() = %v, want %v", got, c.selfDescribe)
			}
			if got := h.HasExplicitTool(); got != c.explicitTool {
				t.Errorf("HasExplicitTool() = %v, want %v", got, c.explicitTool)
			}
		})
	}
}

func TestEffectiveAuth(t *testing.T) {
	bearer, basic := LegacyAuthType("bearer"), LegacyAuthType("basic")
	for _, c := range []struct {
		name     string
		handler  HandlerDefinition
		wantType ToolAuthType // empty: nil expected
		wantRef  *SecretKeyRef
	}{
		{"no auth at all", HandlerDefinition{Type: HandlerTypeHTTP, HTTPConfig: &HTTPConfig{Endpoint: "http://x"}}, "", nil},
		{"auth block wins", HandlerDefinition{Type: HandlerTypeHTTP, Auth: &ToolAuth{Type: ToolAuthServiceAccount, ServiceAccount: &ServiceAccountAuth{Audience: "a"}}}, ToolAuthServiceAccount, nil},
		{"legacy http basic", HandlerDefinition{Type: HandlerTypeHTTP, HTTPConfig: &HTTPConfig{AuthType: &basic, AuthSecretRef: &SecretKeySelector{Name: "s", Key: "k"}}}, ToolAuthBasic, &SecretKeyRef{Name: "s", Key: ptr("k")}},
		{"legacy secret alone means bearer", HandlerDefinition{Type: HandlerTypeOpenAPI, OpenAPIConfig: &OpenAPIConfig{AuthSecretRef: &SecretKeySelector{Name: "s", Key: "token"}}}, ToolAuthBearer, &SecretKeyRef{Name: "s", Key: ptr("token")}},
		{"legacy openapi bearer without secret", HandlerDefinition{Type: HandlerTypeOpenAPI, OpenAPIConfig: &OpenAPIConfig{AuthType: &bearer}}, ToolAuthBearer, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.handler.EffectiveAuth()
			if c.wantType == "" {
				if got != nil {
					t.Fatalf("EffectiveAuth() = %+v, want nil", got)
				}
				return
			}
			if got == nil || got.Type != c.wantType {
				t.Fatalf("EffectiveAuth() = %+v, want type %s", got, c.wantType)
			}
			switch {
			case c.wantRef == nil && got.SecretRef != nil:
				t.Errorf("secretRef = %+v, want none", got.SecretRef)
			case c.wantRef != nil && (got.SecretRef == nil || got.SecretRef.Name != c.wantRef.Name || got.SecretRef.KeyOr("") != c.wantRef.KeyOr("")):
				t.Errorf("secretRef = %+v, want %+v", got.SecretRef, c.wantRef)
			}
			if c.handler.Auth != nil && got == c.handler.Auth {
				t.Error("EffectiveAuth returned the spec's own pointer; want a copy")
			}
		})
	}
}

func TestSandboxAndConnectionNames(t *testing.T) {
	spec := ToolRegistrySpec{Handlers: []HandlerDefinition{
		{Name: "a", Sandbox: &HandlerSandbox{ClassName: "small", ConnectionRefs: []LocalObjectReference{{Name: "github"}, {Name: "jira"}}}},
		{Name: "b"},
		{Name: "c", Sandbox: &HandlerSandbox{ClassName: "large", ConnectionRefs: []LocalObjectReference{{Name: "github"}}}},
		{Name: "d", Sandbox: &HandlerSandbox{ClassName: "small"}},
	}}
	if got, want := spec.SandboxClassNames(), []string{"small", "large"}; !slices.Equal(got, want) {
		t.Errorf("SandboxClassNames() = %v, want %v", got, want)
	}
	if got, want := spec.ConnectionNames(), []string{"github", "jira"}; !slices.Equal(got, want) {
		t.Errorf("ConnectionNames() = %v, want %v", got, want)
	}
}

func TestSandboxClassAllowsConnection(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   SandboxClassSpec
		conn   string
		allows bool
	}{
		{"listed", SandboxClassSpec{AllowedConnections: []LocalObjectReference{{Name: "github"}}}, "github", true},
		{"not listed", SandboxClassSpec{AllowedConnections: []LocalObjectReference{{Name: "github"}}}, "jira", false},
		{"nothing listed", SandboxClassSpec{}, "github", false},
		{"egress none refuses even a listed one", SandboxClassSpec{Network: &SandboxNetwork{Egress: SandboxEgressNone}, AllowedConnections: []LocalObjectReference{{Name: "github"}}}, "github", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.spec.AllowsConnection(c.conn); got != c.allows {
				t.Errorf("AllowsConnection(%s) = %v, want %v", c.conn, got, c.allows)
			}
		})
	}
}
