package agentruntime

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func rawJSON(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// httpHandler is an http handler "weather" with one tool.
func httpHandler(name, desc string) omniav1.HandlerDefinition {
	return omniav1.HandlerDefinition{Name: name, Type: omniav1.HandlerTypeHTTP,
		HTTPConfig: &omniav1.HTTPConfig{Endpoint: "http://" + name + ".svc:8080/call", Method: "POST"},
		Tool: &omniav1.ToolDefinition{Name: name + "_tool", Description: desc,
			InputSchema:  rawJSON(`{"type":"object","properties":{"city":{"type":"string"}}}`),
			OutputSchema: ptr(rawJSON(`{"type":"object"}`))}}
}

func mcpHandler(name string) omniav1.HandlerDefinition {
	return omniav1.HandlerDefinition{Name: name, Type: omniav1.HandlerTypeMCP,
		MCPConfig: &omniav1.MCPConfig{Transport: omniav1.MCPTransportStreamableHTTP, Endpoint: "http://" + name + ".svc/mcp"}}
}

func bearer(h omniav1.HandlerDefinition, secret string, key *string) omniav1.HandlerDefinition {
	h.Auth = &omniav1.ToolAuth{Type: omniav1.ToolAuthBearer, SecretRef: &omniav1.SecretKeyRef{Name: secret, Key: key}}
	return h
}

func saAuth(h omniav1.HandlerDefinition, audience string) omniav1.HandlerDefinition {
	h.Auth = &omniav1.ToolAuth{Type: omniav1.ToolAuthServiceAccount, ServiceAccount: &omniav1.ServiceAccountAuth{Audience: audience}}
	return h
}

func registry(hs ...omniav1.HandlerDefinition) *omniav1.ToolRegistry {
	return &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: 1},
		Spec: omniav1.ToolRegistrySpec{Handlers: hs}}
}

func policy(name string, rules ...string) omniav1.ToolPolicy {
	p := omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: omniav1.ToolPolicySpec{Selector: omniav1.ToolPolicySelector{Registry: "tools"}, Mode: omniav1.ToolPolicyEnforce}}
	for _, r := range rules {
		p.Spec.Rules = append(p.Spec.Rules, omniav1.ToolPolicyRule{Name: r, Deny: omniav1.ToolPolicyDeny{CEL: "false", Message: "no " + r}})
	}
	return p
}

func credSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func decodeTools(t *testing.T, ts *ToolSet) ToolsFile {
	t.Helper()
	var f ToolsFile
	if err := json.Unmarshal(ts.JSON, &f); err != nil {
		t.Fatalf("tools.json does not decode: %v\n%s", err, ts.JSON)
	}
	return f
}

// TestBuildToolSet: tools.json per rule of docs/omnia-controllers.md
// ("Tools reach the pod").
func TestBuildToolSet(t *testing.T) {
	sec := map[string]*corev1.Secret{"wx-token": credSecret("wx-token", map[string]string{"token": "s3cret-value"})}
	cases := []struct {
		name     string
		reg      *omniav1.ToolRegistry
		policies []omniav1.ToolPolicy
		secrets  map[string]*corev1.Secret
		check    func(t *testing.T, f ToolsFile, ts *ToolSet)
	}{
		{"an explicit http tool: its handler with endpoint and method, and the tool's name, description and schemas",
			registry(httpHandler("weather", "Weather by city")), nil, nil,
			func(t *testing.T, f ToolsFile, _ *ToolSet) {
				if f.Registry != "tools" || len(f.Handlers) != 1 || len(f.Tools) != 1 {
					t.Fatalf("file %+v", f)
				}
				h, tool := f.Handlers[0], f.Tools[0]
				if h.Name != "weather" || h.Type != omniav1.HandlerTypeHTTP || h.Endpoint != "http://weather.svc:8080/call" || h.HTTP == nil || h.HTTP.Method != "POST" {
					t.Fatalf("handler %+v", h)
				}
				if tool.Name != "weather_tool" || tool.Handler != "weather" || tool.Description != "Weather by city" ||
					string(tool.InputSchema) != `{"properties":{"city":{"type":"string"}},"type":"object"}` || string(tool.OutputSchema) != `{"type":"object"}` ||
					tool.Endpoint != "http://weather.svc:8080/call" {
					t.Fatalf("tool %+v in=%s out=%s", tool, tool.InputSchema, tool.OutputSchema)
				}
			}},
		{"an mcp handler: a placeholder tool named after the handler, and the handler's transport for the runtime to discover the rest",
			registry(mcpHandler("docs")), nil, nil,
			func(t *testing.T, f ToolsFile, _ *ToolSet) {
				if len(f.Tools) != 1 || f.Tools[0].Name != "docs" || f.Tools[0].Handler != "docs" || !strings.Contains(f.Tools[0].Description, "discovered at runtime") {
					t.Fatalf("tools %+v", f.Tools)
				}
				if h := f.Handlers[0]; h.MCP == nil || h.MCP.Transport != omniav1.MCPTransportStreamableHTTP || h.Endpoint != "http://docs.svc/mcp" {
					t.Fatalf("handler %+v", h)
				}
			}},
		{"the ToolPolicies selecting the registry are in the file, sorted by name, with their rules",
			registry(httpHandler("weather", "w")), []omniav1.ToolPolicy{policy("zeta", "no-prod"), policy("alpha", "a1", "a2")}, nil,
			func(t *testing.T, f ToolsFile, _ *ToolSet) {
				if len(f.Policies) != 2 || f.Policies[0].Name != "alpha" || f.Policies[1].Name != "zeta" {
					t.Fatalf("policies %+v", f.Policies)
				}
				if r := f.Policies[0].Spec.Rules; len(r) != 2 || r[1].Name != "a2" || r[1].Deny.Message != "no a2" || f.Policies[0].Spec.Mode != omniav1.ToolPolicyEnforce {
					t.Fatalf("rules %+v", f.Policies[0].Spec)
				}
			}},
		{"an invalid handler makes the registry offer nothing, as its status would",
			registry(httpHandler("weather", "w"), omniav1.HandlerDefinition{Name: "bad", Type: omniav1.HandlerTypeHTTP}), nil, nil,
			func(t *testing.T, f ToolsFile, _ *ToolSet) {
				if len(f.Handlers) != 0 || len(f.Tools) != 0 {
					t.Fatalf("file %+v", f)
				}
			}},
		{"a bearer handler with a usable Secret: the file names the directory and key, never the value",
			registry(bearer(httpHandler("weather", "w"), "wx-token", nil)), nil, sec,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				a := f.Handlers[0].Auth
				if a == nil || a.Type != omniav1.ToolAuthBearer || a.SecretDir != ToolsMountPath+"/secrets/weather" || !slices.Equal(a.Keys, []string{"token"}) {
					t.Fatalf("auth %+v", a)
				}
				if bytes.Contains(ts.JSON, []byte("s3cret-value")) {
					t.Fatal("the Secret's value is in tools.json")
				}
				if len(ts.secrets) != 1 || ts.secrets[0].secret != "wx-token" || len(ts.unusable) != 0 {
					t.Fatalf("secrets %+v unusable %v", ts.secrets, ts.unusable)
				}
			}},
		{"a Secret the agent may not use (absent or not labelled, so not in the cache): its handler and tools are left out and named",
			registry(bearer(httpHandler("weather", "w"), "other", nil), mcpHandler("docs")), nil, sec,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				if len(f.Handlers) != 1 || f.Handlers[0].Name != "docs" || len(f.Tools) != 1 || f.Tools[0].Handler != "docs" {
					t.Fatalf("file %+v", f)
				}
				if len(ts.secrets) != 0 || len(ts.unusable) != 1 || !strings.Contains(ts.unusable[0], `Secret "other"`) ||
					!strings.Contains(ts.unusable[0], omniav1.LabelTypeCredentials) {
					t.Fatalf("secrets %+v unusable %v", ts.secrets, ts.unusable)
				}
			}},
		{"a Secret without the key its handler reads is left out, naming the key",
			registry(bearer(httpHandler("weather", "w"), "wx-token", ptr("api-key"))), nil, sec,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				if len(f.Handlers) != 0 || len(ts.unusable) != 1 || !strings.Contains(ts.unusable[0], `no key "api-key"`) {
					t.Fatalf("file %+v unusable %v", f, ts.unusable)
				}
			}},
		{"a serviceAccount handler: the file names its token's path and audience, and a token is projected for it, no Secret",
			registry(saAuth(httpHandler("weather", "w"), "weather.example.com"), mcpHandler("docs")), nil, nil,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				var a *ToolsAuth
				for _, h := range f.Handlers {
					if h.Name == "weather" {
						a = h.Auth
					}
				}
				if a == nil || a.Type != omniav1.ToolAuthServiceAccount || a.TokenPath != ToolsMountPath+"/tokens/weather/token" ||
					a.ServiceAccount == nil || a.ServiceAccount.Audience != "weather.example.com" || a.SecretDir != "" {
					t.Fatalf("auth %+v", a)
				}
				if len(ts.tokens) != 1 || ts.tokens[0] != (toolToken{handler: "weather", audience: "weather.example.com"}) ||
					len(ts.secrets) != 0 || len(ts.unusable) != 0 {
					t.Fatalf("tokens %+v secrets %+v unusable %v", ts.tokens, ts.secrets, ts.unusable)
				}
			}},
		{"a serviceAccount handler without an audience (no block, or an empty one) is left out and named: such a token would be one the API server accepts",
			registry(func() omniav1.HandlerDefinition {
				h := httpHandler("weather", "w")
				h.Auth = &omniav1.ToolAuth{Type: omniav1.ToolAuthServiceAccount}
				return h
			}(), saAuth(httpHandler("news", "n"), ""), mcpHandler("docs")), nil, nil,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				if len(f.Handlers) != 1 || f.Handlers[0].Name != "docs" || len(ts.tokens) != 0 ||
					len(ts.unusable) != 2 || !strings.Contains(ts.unusable[0], `"news": auth.serviceAccount.audience`) ||
					!strings.Contains(ts.unusable[1], `"weather": auth.serviceAccount.audience`) {
					t.Fatalf("file %+v tokens %+v unusable %v", f, ts.tokens, ts.unusable)
				}
			}},
		{"the deprecated httpConfig.authSecretRef is folded into auth and its Secret mounted",
			registry(func() omniav1.HandlerDefinition {
				h := httpHandler("weather", "w")
				h.HTTPConfig.AuthSecretRef = &omniav1.SecretKeySelector{Name: "wx-token", Key: "token"}
				return h
			}()), nil, sec,
			func(t *testing.T, f ToolsFile, ts *ToolSet) {
				h := f.Handlers[0]
				if h.HTTP.AuthSecretRef != nil || h.Auth == nil || h.Auth.Type != omniav1.ToolAuthBearer || len(ts.secrets) != 1 {
					t.Fatalf("handler %+v auth %+v", h, h.Auth)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := BuildToolSet(tc.reg, tc.policies, tc.secrets)
			tc.check(t, decodeTools(t, ts), ts)
		})
	}
}

// TestToolSetDigest: the bytes, and so the pod template's hash, follow
// the tool set and nothing else.
func TestToolSetDigest(t *testing.T) {
	base := func() (*omniav1.ToolRegistry, []omniav1.ToolPolicy) {
		return registry(httpHandler("weather", "w"), mcpHandler("docs")), []omniav1.ToolPolicy{policy("a", "r1"), policy("b", "r2")}
	}
	reg, pols := base()
	ref := BuildToolSet(reg, pols, nil)

	t.Run("equal inputs in another order give equal bytes", func(t *testing.T) {
		reg, pols := base()
		slices.Reverse(reg.Spec.Handlers)
		slices.Reverse(pols)
		reg.Spec.Handlers[1].Tool.InputSchema = rawJSON(`{"properties":{"city":{"type":"string"}}, "type":"object"}`)
		if got := BuildToolSet(reg, pols, nil); !bytes.Equal(got.JSON, ref.JSON) || got.Digest != ref.Digest {
			t.Fatalf("bytes differ:\n%s\n%s", got.JSON, ref.JSON)
		}
	})
	t.Run("registry status churn (probe times, availability, conditions, observedGeneration) gives equal bytes", func(t *testing.T) {
		reg, pols := base()
		now := metav1.NewTime(time.Now())
		reg.Status = omniav1.ToolRegistryStatus{Phase: omniav1.ToolRegistryPhaseDegraded, ObservedGeneration: 7, LastDiscoveryTime: &now,
			DiscoveredTools: []omniav1.DiscoveredTool{{Name: "weather_tool", HandlerName: "weather", Status: omniav1.ToolStatusUnavailable, LastChecked: &now, Error: ptr("refused")}},
			Conditions:      []metav1.Condition{{Type: omniav1.ConditionPolicyBound, Status: metav1.ConditionTrue, LastTransitionTime: now}}}
		pols[0].Status.Phase = omniav1.ToolPolicyPhaseError
		if got := BuildToolSet(reg, pols, nil); got.Digest != ref.Digest {
			t.Fatal("status churn changed the tool set")
		}
	})
	for name, mut := range map[string]func(*omniav1.ToolRegistry, []omniav1.ToolPolicy){
		"a tool description": func(r *omniav1.ToolRegistry, _ []omniav1.ToolPolicy) { r.Spec.Handlers[0].Tool.Description = "new" },
		"a handler endpoint": func(r *omniav1.ToolRegistry, _ []omniav1.ToolPolicy) {
			r.Spec.Handlers[1].MCPConfig.Endpoint = "http://x/mcp"
		},
		"an input schema": func(r *omniav1.ToolRegistry, _ []omniav1.ToolPolicy) {
			r.Spec.Handlers[0].Tool.InputSchema = rawJSON(`{"type":"object"}`)
		},
		"a policy rule": func(_ *omniav1.ToolRegistry, p []omniav1.ToolPolicy) { p[0].Spec.Rules[0].Deny.CEL = "true" },
		"a handler's timeout": func(r *omniav1.ToolRegistry, _ []omniav1.ToolPolicy) {
			r.Spec.Handlers[0].Timeout = &metav1.Duration{Duration: time.Minute}
		},
	} {
		t.Run("a change of "+name+" changes the bytes", func(t *testing.T) {
			reg, pols := base()
			mut(reg, pols)
			if BuildToolSet(reg, pols, nil).Digest == ref.Digest {
				t.Fatal("same digest")
			}
		})
	}
}

// TestToolsReachThePod: a usable registry puts the tools volume, its
// read-only mount and OMNIA_TOOLS_PATH into the runtime container, next
// to OMNIA_TOOLREGISTRY, and mounts each usable Secret by reference; no
// registry, none of it. ToolSecretsReady says which Secrets were left out.
func TestToolsReachThePod(t *testing.T) {
	packs := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}
	withRef := agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"} })
	cases := []struct {
		name       string
		reg        *omniav1.ToolRegistry
		secrets    map[string]*corev1.Secret
		wantTools  bool
		wantSecret string // the Secret projected, "" for none
		wantToken  string // the audience of the projected token, "" for none
		wantCond   metav1.ConditionStatus
	}{
		{"no registry: no tools volume, mount or path, no ToolSecretsReady", nil, nil, false, "", "", ""},
		{"a registry without auth: tools.json only", registry(httpHandler("weather", "w")), nil, true, "", "", metav1.ConditionTrue},
		{"a usable Secret is projected by name, never copied", registry(bearer(httpHandler("weather", "w"), "wx-token", nil)),
			map[string]*corev1.Secret{"wx-token": credSecret("wx-token", map[string]string{"token": "v"})}, true, "wx-token", "", metav1.ConditionTrue},
		{"a Secret the agent may not use is not mounted and ToolSecretsReady is False", registry(bearer(httpHandler("weather", "w"), "wx-token", nil)),
			nil, true, "", "", metav1.ConditionFalse},
		{"a serviceAccount handler gets a projected token of the pod's account for its audience, with an hour's lifetime, in the runtime's tools mount",
			registry(saAuth(httpHandler("weather", "w"), "weather.example.com")), nil, true, "", "weather.example.com", metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs(withRef.DeepCopy(), packs, readyProvider(nil))
			in.Registry = tc.reg
			for k, v := range tc.secrets {
				in.Secrets[k] = v
			}
			var conds []metav1.Condition
			res := Resolve(in, &conds, t0)
			d, err := BuildDeployment(in, res, Config{FacadeImage: "facade:1"}, "runtime:1")
			if err != nil {
				t.Fatal(err)
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			var vol *corev1.Volume
			for i := range pod.Volumes {
				if pod.Volumes[i].Name == ToolsVolumeName {
					vol = &pod.Volumes[i]
				}
			}
			mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == ToolsVolumeName && m.MountPath == ToolsMountPath && m.ReadOnly
			})
			pathEnv := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvToolsPath && e.Value == ToolsPath })
			if (vol != nil) != tc.wantTools || mounted != tc.wantTools || pathEnv != tc.wantTools {
				t.Fatalf("volume %v, mounted %v, OMNIA_TOOLS_PATH %v; want %v", vol != nil, mounted, pathEnv, tc.wantTools)
			}
			if tc.wantTools {
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "OMNIA_TOOLREGISTRY" && e.Value == "tools" }) {
					t.Fatal("OMNIA_TOOLREGISTRY is gone")
				}
				srcs := vol.Projected.Sources
				if cm := srcs[0].ConfigMap; cm == nil || cm.Name != "agent-tools" || cm.Items[0].Key != omniav1.ToolsJSONKey {
					t.Fatalf("first source %+v", srcs[0])
				}
				got, gotToken := "", ""
				for _, s := range srcs[1:] {
					if tok := s.ServiceAccountToken; tok != nil {
						gotToken = tok.Audience
						if tok.Path != "tokens/weather/token" || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != 3600 {
							t.Fatalf("token projection %+v", tok)
						}
						continue
					}
					got = s.Secret.Name
					if s.Secret.Items[0].Path != "secrets/weather/token" {
						t.Fatalf("secret items %+v", s.Secret.Items)
					}
				}
				if got != tc.wantSecret || gotToken != tc.wantToken {
					t.Fatalf("projected Secret %q and token audience %q, want %q and %q", got, gotToken, tc.wantSecret, tc.wantToken)
				}
			}
			cond := meta.FindStatusCondition(conds, omniav1.ConditionToolSecretsReady)
			switch {
			case tc.wantCond == "" && cond != nil:
				t.Fatalf("ToolSecretsReady set: %+v", cond)
			case tc.wantCond != "" && (cond == nil || cond.Status != tc.wantCond):
				t.Fatalf("ToolSecretsReady %+v, want %s", cond, tc.wantCond)
			case tc.wantCond == metav1.ConditionFalse && !strings.Contains(cond.Message, `"wx-token"`):
				t.Fatalf("message %q does not name the Secret", cond.Message)
			}
		})
	}
}

// TestCandidateTools: a rollout candidate whose tool set is the stable
// one's mounts <agent>-tools; one whose tool set differs, or that has
// tools while the stable side has none, mounts its own ConfigMap; one
// without tools mounts none.
func TestCandidateTools(t *testing.T) {
	a := BuildToolSet(registry(httpHandler("weather", "w")), nil, nil)
	b := BuildToolSet(registry(httpHandler("weather", "other")), nil, nil)
	for _, tc := range []struct {
		name              string
		candidate, stable *ToolSet
		wantCM            string // "" for no tools
	}{
		{"same tool set: the stable ConfigMap", a, BuildToolSet(registry(httpHandler("weather", "w")), nil, nil), "agent-tools"},
		{"another tool set: its own ConfigMap", b, a, "agent-candidate-tools"},
		{"no stable tool set: its own ConfigMap", a, nil, "agent-candidate-tools"},
		{"no candidate tool set: none", nil, a, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := candidateTools(tc.candidate, tc.stable, "agent")
			if tc.wantCM == "" {
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if got == nil || got.Digest != tc.candidate.Digest || got.volume("agent").Projected.Sources[0].ConfigMap.Name != tc.wantCM {
				t.Fatalf("got %+v, want the candidate's tools from %s", got, tc.wantCM)
			}
			if tc.candidate.configMap != "" {
				t.Fatal("the candidate's resolved tool set was changed in place")
			}
		})
	}
}

// TestDecideCandidateToolsConfigMap: during a rollout whose candidate's
// tool set differs, the candidate's own tools ConfigMap is written, owned,
// before the candidate Deployment, which mounts it; with the stable tool
// set the candidate mounts <agent>-tools and has no ConfigMap of its own;
// the rollout over (or the candidate's tools now the stable ones), the
// ConfigMap is deleted.
func TestDecideCandidateToolsConfigMap(t *testing.T) {
	canary := func(a *omniav1.AgentRuntime) {
		a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"}
		// An indefinite pause holds the rollout at 50%.
		a.Spec.Rollout = roHeld(50, omniav1.TrafficRoutingReplicaWeighted)
	}
	rolling := func(candReg *omniav1.ToolRegistry) func() snapshot {
		return func() snapshot {
			s := readySnapshot(canary)
			s.in.Registry = registry(httpHandler("weather", "w"))
			s.candidate.in.Registry = candReg
			return s
		}
	}
	settled := func(s snapshot) snapshot { return written(s, decide(s)) }
	const candCM, candDep = "agent-candidate-tools", "agent" + CandidateSuffix
	cases := []struct {
		name       string
		snap       func() snapshot
		wantWrites []string // the candidate ConfigMap's writes
		wantMount  string   // the ConfigMap the candidate Deployment mounts; "" none, "-" no candidate write
	}{
		{"another tool set: its own ConfigMap, before the candidate Deployment, which mounts it",
			rolling(registry(httpHandler("weather", "forecast"))), []string{"create *v1.ConfigMap " + candCM}, candCM},
		{"the stable tool set: no ConfigMap of its own, it mounts the stable one",
			rolling(registry(httpHandler("weather", "w"))), nil, "agent-tools"},
		{"no tools on the candidate: no ConfigMap, no tools volume", rolling(nil), nil, ""},
		{"an unchanged candidate ConfigMap is not written", func() snapshot {
			return settled(rolling(registry(httpHandler("weather", "forecast")))())
		}, nil, "-"},
		{"an edited candidate ConfigMap is reverted", func() snapshot {
			s := settled(rolling(registry(httpHandler("weather", "forecast")))())
			s.live.candidateTools.obj.Data[omniav1.ToolsJSONKey] = "{}"
			return s
		}, []string{"update *v1.ConfigMap " + candCM}, "-"},
		{"the candidate's tools become the stable ones: its ConfigMap is deleted", func() snapshot {
			s := settled(rolling(registry(httpHandler("weather", "forecast")))())
			s.candidate.in.Registry = registry(httpHandler("weather", "w"))
			return s
		}, []string{"delete *v1.ConfigMap " + candCM}, "agent-tools"},
		{"the rollout over: the candidate Deployment and its ConfigMap are deleted", func() snapshot {
			s := settled(rolling(registry(httpHandler("weather", "forecast")))())
			s.in.Agent.Spec.Rollout.Candidate = nil
			s.candidate = nil
			return s
		}, []string{"delete *v1.ConfigMap " + candCM}, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.snap())
			var got []string
			cmAt, depAt := -1, -1
			var dep *appsv1.Deployment
			for i, w := range writesOf(p) {
				if strings.HasSuffix(w, " "+candCM) {
					got = append(got, w)
					cmAt = i
					if owner := metav1.GetControllerOf(p.writes[i].obj); p.writes[i].op != opDelete && (owner == nil || owner.Name != "agent") {
						t.Fatalf("%s without the agent as controller", w)
					}
				}
				if strings.HasSuffix(w, " "+candDep) && p.writes[i].op != opDelete {
					depAt, dep = i, p.writes[i].obj.(*appsv1.Deployment)
				}
			}
			if !slices.Equal(got, tc.wantWrites) {
				t.Fatalf("candidate ConfigMap writes %v, want %v (all: %v)", got, tc.wantWrites, writesOf(p))
			}
			if cmAt >= 0 && depAt >= 0 && p.writes[cmAt].op == opCreate && cmAt > depAt {
				t.Fatalf("writes %v: the ConfigMap must come before the candidate Deployment", writesOf(p))
			}
			if tc.wantMount == "-" {
				return
			}
			if dep == nil {
				t.Fatalf("no candidate Deployment written: %v", writesOf(p))
			}
			mount := ""
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Name == ToolsVolumeName {
					mount = v.Projected.Sources[0].ConfigMap.Name
				}
			}
			if mount != tc.wantMount {
				t.Fatalf("the candidate mounts tools from %q, want %q", mount, tc.wantMount)
			}
		})
	}
}

// TestDecideToolsConfigMap: the pass writes the owned tools ConfigMap
// before the Deployment, leaves an unchanged one alone, reverts an edit,
// deletes its own when the agent has no tools, never touches one it does
// not control, and refuses to run on top of a foreign one.
func TestDecideToolsConfigMap(t *testing.T) {
	withTools := func() snapshot {
		s := readySnapshot(func(a *omniav1.AgentRuntime) { a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"} })
		s.in.Registry = registry(httpHandler("weather", "w"))
		return s
	}
	settled := func(s snapshot) snapshot { return written(s, decide(s)) }
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agent-tools", Namespace: "ns"}, Data: map[string]string{"x": "y"}}
	cases := []struct {
		name       string
		snap       func() snapshot
		wantWrites []string // the ConfigMap writes, in order
		wantFirst  bool     // the ConfigMap write comes before the Deployment's
		wantFailed bool
	}{
		{"a registry: the ConfigMap is created, owned, before the Deployment", withTools,
			[]string{"create *v1.ConfigMap agent-tools"}, true, false},
		{"an unchanged ConfigMap is not written", func() snapshot { return settled(withTools()) }, nil, false, false},
		{"an edited ConfigMap is reverted", func() snapshot {
			s := settled(withTools())
			s.live.tools.obj.Data[omniav1.ToolsJSONKey] = `{"tools":[]}`
			return s
		}, []string{"update *v1.ConfigMap agent-tools"}, false, false},
		{"a key added to the ConfigMap is removed", func() snapshot {
			s := settled(withTools())
			s.live.tools.obj.Data["extra"] = "x"
			return s
		}, []string{"update *v1.ConfigMap agent-tools"}, false, false},
		{"the registry gone: its stale ConfigMap is deleted", func() snapshot {
			s := settled(withTools())
			s.in.Registry = nil
			return s
		}, []string{"delete *v1.ConfigMap agent-tools"}, false, false},
		{"no registry and a ConfigMap of that name it does not control: left alone", func() snapshot {
			s := readySnapshot(nil)
			s.live.tools.obj = foreign.DeepCopy()
			return s
		}, nil, false, false},
		{"a registry and a foreign ConfigMap of that name: refused, the agent Failed", func() snapshot {
			s := withTools()
			s.live.tools.obj = foreign.DeepCopy()
			return s
		}, nil, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.snap())
			var got []string
			cmAt, depAt := -1, -1
			for i, w := range writesOf(p) {
				if strings.Contains(w, "ConfigMap") {
					got = append(got, w)
					cmAt = i
					if owner := metav1.GetControllerOf(p.writes[i].obj); w[:6] != "delete" && (owner == nil || owner.Name != "agent") {
						t.Fatalf("%s without the agent as controller", w)
					}
				}
				if w == createDeployment && depAt < 0 {
					depAt = i
				}
			}
			if !slices.Equal(got, tc.wantWrites) {
				t.Fatalf("ConfigMap writes %v, want %v (all: %v)", got, tc.wantWrites, writesOf(p))
			}
			if tc.wantFirst && (depAt < 0 || cmAt > depAt) {
				t.Fatalf("writes %v: the ConfigMap must come before the Deployment", writesOf(p))
			}
			failed := p.status != nil && p.status.Phase == omniav1.AgentRuntimePhaseFailed && p.err != nil
			if failed != tc.wantFailed {
				t.Fatalf("failed %v (status %+v, err %v), want %v", failed, p.status, p.err, tc.wantFailed)
			}
		})
	}
}
