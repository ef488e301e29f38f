package agentruntime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolregistry"
)

// This file hands an agent's tools to its pods (docs/omnia-controllers.md,
// "Tools reach the pod"): a pure function turns the resolved ToolRegistry,
// the ToolPolicies that select it and the Secrets its handlers name into
// tools.json, which the agent's owned ConfigMap <agent>-tools carries and
// the runtime container mounts; the handlers' Secrets are mounted by
// reference next to it, never read for their values.

// Where the runtime container finds its tools.
const (
	// ToolsVolumeName is the pod volume holding tools.json and the tool
	// Secrets.
	ToolsVolumeName = "omnia-tools"
	// ToolsMountPath is where that volume is mounted, read-only.
	ToolsMountPath = "/etc/omnia/tools"
	// ToolsPath is the tools file in the runtime container.
	ToolsPath = ToolsMountPath + "/" + omniav1.ToolsJSONKey
	// ToolSecretsDir holds, under ToolsMountPath, one directory per handler
	// with the keys of its auth Secret.
	ToolSecretsDir = "secrets"
	// ToolTokensDir holds, under ToolsMountPath, one directory per
	// serviceAccount handler with its projected token in ToolTokenFile.
	ToolTokensDir = "tokens"
	// ToolTokenFile is the file name of a handler's projected token.
	ToolTokenFile = "token"
	// ToolTokenExpirationSeconds is the lifetime asked for a handler's
	// projected service account token. The kubelet rotates the file
	// before it expires (at 80% of its life), so the runtime reads it
	// anew for each call; an hour bounds what a leaked token allows.
	ToolTokenExpirationSeconds = int64(3600)
	// EnvToolsPath names ToolsPath to the runtime.
	EnvToolsPath = "OMNIA_TOOLS_PATH"
)

// ToolsConfigMapName is the ConfigMap holding an agent's tools.json.
func ToolsConfigMapName(agent string) string { return agent + "-tools" }

// CandidateToolsConfigMapName is the ConfigMap holding a rollout
// candidate's tools.json while its tool set differs from the stable one.
func CandidateToolsConfigMapName(agent string) string { return agent + "-candidate-tools" }

// ToolsFile is the content of tools.json. Every list is sorted, so equal
// inputs give equal bytes.
type ToolsFile struct {
	// Registry is the ToolRegistry's name.
	Registry string `json:"registry"`
	// Handlers are the handlers the agent may call, by name.
	Handlers []ToolsHandler `json:"handlers"`
	// Tools are the tools those handlers offer, by handler then name.
	Tools []ToolsTool `json:"tools"`
	// Policies are the ToolPolicies that select the registry, by name.
	Policies []ToolsPolicy `json:"policies"`
}

// ToolsHandler is how the runtime calls one handler: its spec, with the
// deprecated auth fields folded into Auth.
type ToolsHandler struct {
	Name     string                  `json:"name"`
	Type     omniav1.HandlerType     `json:"type"`
	Endpoint string                  `json:"endpoint,omitempty"`
	Timeout  string                  `json:"timeout,omitempty"`
	HTTP     *omniav1.HTTPConfig     `json:"httpConfig,omitempty"`
	OpenAPI  *omniav1.OpenAPIConfig  `json:"openAPIConfig,omitempty"`
	GRPC     *omniav1.GRPCConfig     `json:"grpcConfig,omitempty"`
	MCP      *omniav1.MCPConfig      `json:"mcpConfig,omitempty"`
	Client   *omniav1.ClientConfig   `json:"clientConfig,omitempty"`
	Platform *omniav1.PlatformConfig `json:"platformConfig,omitempty"`
	Auth     *ToolsAuth              `json:"auth,omitempty"`
	Sandbox  *omniav1.HandlerSandbox `json:"sandbox,omitempty"`
}

// ToolsAuth is a handler's authentication. The credential is never in the
// file: for bearer and basic SecretDir is the directory, in the
// container, holding the files named in Keys; for serviceAccount
// TokenPath is the file holding the pod's service account token for the
// handler's audience, which the runtime sends as a bearer token and
// re-reads for each call (the kubelet rotates it).
type ToolsAuth struct {
	Type             omniav1.ToolAuthType          `json:"type"`
	SecretDir        string                        `json:"secretDir,omitempty"`
	Keys             []string                      `json:"keys,omitempty"`
	TokenPath        string                        `json:"tokenPath,omitempty"`
	ServiceAccount   *omniav1.ServiceAccountAuth   `json:"serviceAccount,omitempty"`
	WorkloadIdentity *omniav1.WorkloadIdentityAuth `json:"workloadIdentity,omitempty"`
}

// ToolsTool is one tool the model sees: what the ToolRegistry lists in
// status.discoveredTools, without the availability a probe judges (that
// changes with the backend, not with the tool set).
type ToolsTool struct {
	Name         string          `json:"name"`
	Handler      string          `json:"handler"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Endpoint     string          `json:"endpoint,omitempty"`
}

// ToolsPolicy is one ToolPolicy that selects the registry: its name and
// its spec (selector, rules, required claims, mode, header injection).
type ToolsPolicy struct {
	Name string                 `json:"name"`
	Spec omniav1.ToolPolicySpec `json:"spec"`
}

// toolSecret is one handler's auth Secret, mounted by reference.
type toolSecret struct {
	handler string
	secret  string
	keys    []string
}

// toolToken is one serviceAccount handler's projected token.
type toolToken struct {
	handler  string
	audience string
}

// ToolSet is what the agent's pods get of a resolved ToolRegistry.
type ToolSet struct {
	// JSON is tools.json.
	JSON []byte
	// Digest is the hash of JSON, in the pod template's config hash.
	Digest string
	// secrets are mounted next to tools.json, by handler name.
	secrets []toolSecret
	// tokens are projected next to tools.json, by handler name.
	tokens []toolToken
	// configMap is the ConfigMap tools.json is mounted from; empty for
	// the agent's own (ToolsConfigMapName).
	configMap string
	// unusable names each Secret left out, and why.
	unusable []string
}

// BuildToolSet builds the tools of a resolved registry. The tools are
// the registry's discovered tools as its controller derives them from the
// spec (toolregistry.DiscoverTools), not its status: status writes (probe
// times, availability, conditions) change nothing here, so they never
// roll the pods. A handler whose auth Secret is not in secrets (absent, or
// not labelled for use: the controllers' cache holds only labelled
// Secrets) or lacks a key it reads is left out with its tools, and named
// in unusable.
func BuildToolSet(tr *omniav1.ToolRegistry, policies []omniav1.ToolPolicy, secrets map[string]*corev1.Secret) *ToolSet {
	ts := &ToolSet{}
	f := ToolsFile{Registry: tr.Name, Handlers: []ToolsHandler{}, Tools: []ToolsTool{}, Policies: []ToolsPolicy{}}
	tools, _ := toolregistry.DiscoverTools(&tr.Spec, toolregistry.DefaultPlatformCatalog)
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.HandlerName] = true
	}
	usable := map[string]bool{}
	for i := range tr.Spec.Handlers {
		h := &tr.Spec.Handlers[i]
		if !offered[h.Name] {
			continue
		}
		th, cred, why := toolsHandler(h, secrets)
		if why != "" {
			ts.unusable = append(ts.unusable, why)
			continue
		}
		usable[h.Name] = true
		f.Handlers = append(f.Handlers, th)
		if cred.secret != nil {
			ts.secrets = append(ts.secrets, *cred.secret)
		}
		if cred.token != nil {
			ts.tokens = append(ts.tokens, *cred.token)
		}
	}
	for _, t := range tools {
		if usable[t.HandlerName] {
			f.Tools = append(f.Tools, ToolsTool{Name: t.Name, Handler: t.HandlerName, Description: t.Description,
				InputSchema: canonicalJSON(t.InputSchema), OutputSchema: canonicalJSON(t.OutputSchema), Endpoint: t.Endpoint})
		}
	}
	for i := range policies {
		f.Policies = append(f.Policies, ToolsPolicy{Name: policies[i].Name, Spec: *policies[i].Spec.DeepCopy()})
	}
	sort.Slice(f.Handlers, func(i, j int) bool { return f.Handlers[i].Name < f.Handlers[j].Name })
	sort.Slice(f.Tools, func(i, j int) bool {
		if f.Tools[i].Handler != f.Tools[j].Handler {
			return f.Tools[i].Handler < f.Tools[j].Handler
		}
		return f.Tools[i].Name < f.Tools[j].Name
	})
	sort.Slice(f.Policies, func(i, j int) bool { return f.Policies[i].Name < f.Policies[j].Name })
	sort.Slice(ts.secrets, func(i, j int) bool { return ts.secrets[i].handler < ts.secrets[j].handler })
	sort.Slice(ts.tokens, func(i, j int) bool { return ts.tokens[i].handler < ts.tokens[j].handler })
	sort.Strings(ts.unusable)
	// Marshalling these types cannot fail: no channel, func or cyclic
	// value, and every raw schema was re-encoded by canonicalJSON.
	ts.JSON, _ = json.Marshal(f)
	sum := sha256.Sum256(ts.JSON)
	ts.Digest = hex.EncodeToString(sum[:])
	return ts
}

// handlerCredential is what a handler's auth adds to the tools volume: a
// Secret by reference or a projected token; neither for the others.
type handlerCredential struct {
	secret *toolSecret
	token  *toolToken
}

// toolsHandler is h as tools.json shows it and its credential to mount,
// or why the handler cannot be used.
func toolsHandler(h *omniav1.HandlerDefinition, secrets map[string]*corev1.Secret) (ToolsHandler, handlerCredential, string) {
	th := ToolsHandler{Name: h.Name, Type: h.Type, Endpoint: toolregistry.Endpoint(h), Sandbox: h.Sandbox.DeepCopy(),
		HTTP: h.HTTPConfig.DeepCopy(), OpenAPI: h.OpenAPIConfig.DeepCopy(), GRPC: h.GRPCConfig.DeepCopy(),
		MCP: h.MCPConfig.DeepCopy(), Client: h.ClientConfig.DeepCopy(), Platform: h.PlatformConfig.DeepCopy()}
	if h.Timeout != nil {
		th.Timeout = h.Timeout.Duration.String()
	}
	// The deprecated fields are folded into Auth (EffectiveAuth): the
	// runtime reads one place.
	if th.HTTP != nil {
		th.HTTP.AuthType, th.HTTP.AuthSecretRef = nil, nil
	}
	if th.OpenAPI != nil {
		th.OpenAPI.AuthType, th.OpenAPI.AuthSecretRef = nil, nil
	}
	auth := h.EffectiveAuth()
	if auth == nil || auth.Type == "" || auth.Type == omniav1.ToolAuthNone {
		return th, handlerCredential{}, ""
	}
	th.Auth = &ToolsAuth{Type: auth.Type, ServiceAccount: auth.ServiceAccount, WorkloadIdentity: auth.WorkloadIdentity}
	if auth.Type == omniav1.ToolAuthServiceAccount {
		// The schema requires the block and its audience; a registry
		// written before that rule could still lack them, and a token
		// without an audience would be one the API server accepts.
		if auth.ServiceAccount == nil || auth.ServiceAccount.Audience == "" {
			return th, handlerCredential{}, fmt.Sprintf("handler %q: auth.serviceAccount.audience is not set", h.Name)
		}
		th.Auth.TokenPath = ToolsMountPath + "/" + ToolTokensDir + "/" + h.Name + "/" + ToolTokenFile
		return th, handlerCredential{token: &toolToken{handler: h.Name, audience: auth.ServiceAccount.Audience}}, ""
	}
	if auth.SecretRef == nil || (auth.Type != omniav1.ToolAuthBearer && auth.Type != omniav1.ToolAuthBasic) {
		return th, handlerCredential{}, ""
	}
	name := auth.SecretRef.Name
	keys := secretKeys(auth)
	s := secrets[name]
	if s == nil {
		return th, handlerCredential{}, fmt.Sprintf("handler %q: Secret %q does not exist or is not labelled %s=%s", h.Name, name,
			omniav1.LabelType, omniav1.LabelTypeCredentials)
	}
	for _, k := range keys {
		if _, ok := s.Data[k]; !ok {
			return th, handlerCredential{}, fmt.Sprintf("handler %q: Secret %q has no key %q", h.Name, name, k)
		}
	}
	th.Auth.SecretDir = ToolsMountPath + "/" + ToolSecretsDir + "/" + h.Name
	th.Auth.Keys = keys
	return th, handlerCredential{secret: &toolSecret{handler: h.Name, secret: name, keys: keys}}, ""
}

// secretKeys are the keys of its Secret a bearer or basic handler reads:
// the one named, else bearer's "token" or basic's "username" and
// "password" (ToolAuth.SecretRef).
func secretKeys(a *omniav1.ToolAuth) []string {
	if k := a.SecretRef.Key; k != nil && *k != "" {
		return []string{*k}
	}
	if a.Type == omniav1.ToolAuthBasic {
		return []string{"password", "username"}
	}
	return []string{"token"}
}

// canonicalJSON re-encodes a schema with sorted keys, so two equal
// schemas stored with their keys in another order give the same bytes.
// Numbers keep their text. nil or undecodable (the API server stores
// only valid JSON) gives nil.
func canonicalJSON(j *apiextensionsv1.JSON) json.RawMessage {
	if j == nil || len(j.Raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(j.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// volume is the pod volume of the tool set: tools.json from the agent's
// ConfigMap and each handler's Secret keys under secrets/<handler>/, all
// by reference (the kubelet reads them; the controller never does).
func (ts *ToolSet) volume(agent string) corev1.Volume {
	srcs := []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: ts.configMapName(agent)},
		Items:                []corev1.KeyToPath{{Key: omniav1.ToolsJSONKey, Path: omniav1.ToolsJSONKey}},
	}}}
	for _, s := range ts.secrets {
		items := make([]corev1.KeyToPath, 0, len(s.keys))
		for _, k := range s.keys {
			items = append(items, corev1.KeyToPath{Key: k, Path: ToolSecretsDir + "/" + s.handler + "/" + k})
		}
		srcs = append(srcs, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.secret}, Items: items}})
	}
	// A serviceAccount handler's token: the pod's service account, for
	// the handler's audience only, issued and rotated by the kubelet.
	for _, tok := range ts.tokens {
		srcs = append(srcs, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: tok.audience, ExpirationSeconds: ptr(ToolTokenExpirationSeconds),
			Path: ToolTokensDir + "/" + tok.handler + "/" + ToolTokenFile}})
	}
	// Readable by the pod's group (fsGroup) only, not by every user.
	return corev1.Volume{Name: ToolsVolumeName, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: srcs, DefaultMode: ptr(int32(0o440))}}}
}

// configMapName is the ConfigMap the tool set is mounted from.
func (ts *ToolSet) configMapName(agent string) string {
	if ts.configMap != "" {
		return ts.configMap
	}
	return ToolsConfigMapName(agent)
}

// buildToolsConfigMap is the tools ConfigMap of the agent (or of its
// candidate) holding ts.
func buildToolsConfigMap(a *omniav1.AgentRuntime, ts *ToolSet) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ts.configMapName(a.Name), Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Data:       map[string]string{omniav1.ToolsJSONKey: string(ts.JSON)},
	}
}

// tools sets ToolSecretsReady and the resolution's tool set once the
// registry resolved; without a usable registry the condition goes.
func (r *resolver) tools() {
	if r.res.Registry == nil {
		meta.RemoveStatusCondition(r.conds, omniav1.ConditionToolSecretsReady)
		return
	}
	ts := BuildToolSet(r.res.Registry, r.in.ToolPolicies, r.in.Secrets)
	r.res.Tools = ts
	if len(ts.unusable) == 0 {
		r.set(omniav1.ConditionToolSecretsReady, metav1.ConditionTrue, omniav1.ReasonToolSecretsMounted,
			fmt.Sprintf("%d tool Secret(s) mounted", len(ts.secrets)))
		return
	}
	msg := "left out of the agent's tools: " + strings.Join(ts.unusable, "; ")
	if r.set(omniav1.ConditionToolSecretsReady, metav1.ConditionFalse, omniav1.ReasonToolSecretNotUsable, msg) {
		r.res.Events = append(r.res.Events, Event{Reason: omniav1.EventToolSecretNotUsable, Message: msg})
	}
}

// toolsConfigMap plans the write of the agent's tools ConfigMap, or its
// removal when the agent has no tool set. Like the other owned objects,
// one of that name the agent does not control is refused, and an edit of
// it by someone else is reverted (its watch brings the pass).
func (d *decider) toolsConfigMap(ts *ToolSet) error {
	return d.ownedToolsConfigMap(d.s.live.tools, ts)
}

// candidateToolsConfigMap plans the write of the candidate's own tools
// ConfigMap when it mounts one (candidateTools), else its removal.
func (d *decider) candidateToolsConfigMap(ts *ToolSet) error {
	if ts != nil && ts.configMap != CandidateToolsConfigMapName(d.s.in.Agent.Name) {
		ts = nil
	}
	return d.ownedToolsConfigMap(d.s.live.candidateTools, ts)
}

// ownedToolsConfigMap plans the write of the tools ConfigMap live is the
// read of (ts's), or its removal when ts is nil.
func (d *decider) ownedToolsConfigMap(live found[*corev1.ConfigMap], ts *ToolSet) error {
	a := d.s.in.Agent
	if live.err != nil {
		return live.err
	}
	if ts == nil {
		if live.obj != nil && d.controls(live.obj) {
			uid := live.obj.UID
			if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy(), preconditions: &metav1.Preconditions{UID: &uid}}); client.IgnoreNotFound(o.err) != nil {
				return fmt.Errorf("delete ConfigMap %s/%s: %w", a.Namespace, live.obj.Name, o.err)
			}
		}
		return nil
	}
	want := buildToolsConfigMap(a, ts)
	d.own(want, nil)
	switch {
	case live.obj == nil:
		if o := d.do(write{op: opCreate, obj: want}); o.err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", want.Namespace, want.Name, o.err)
		}
		return nil
	case !d.controls(live.obj):
		return notOwned(live.obj)
	case !toolsConfigMapDrifted(want, live.obj):
		return nil
	}
	upd := live.obj.DeepCopy()
	upd.Labels = mergeMap(upd.Labels, want.Labels)
	upd.OwnerReferences = want.OwnerReferences
	upd.Data, upd.BinaryData = want.Data, nil
	if o := d.do(write{op: opUpdate, obj: upd}); o.err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", upd.Namespace, upd.Name, o.err)
	}
	return nil
}

// toolsConfigMapDrifted reports whether the live ConfigMap no longer
// holds exactly the desired tools.json (and nothing else) or lost a
// label.
func toolsConfigMapDrifted(want, live *corev1.ConfigMap) bool {
	return !labelsCovered(want.Labels, live.Labels) || len(live.Data) != 1 || len(live.BinaryData) != 0 ||
		live.Data[omniav1.ToolsJSONKey] != want.Data[omniav1.ToolsJSONKey]
}

// candidateTools is the tool set a rollout candidate mounts. One equal
// to the stable side's is mounted from <agent>-tools, as the stable pods
// mount it; one that differs (another registry, other policies, no
// stable tools at all) from the candidate's own ConfigMap,
// CandidateToolsConfigMapName, which lives as long as the candidate
// Deployment (docs/omnia-controllers.md).
func candidateTools(candidate, stable *ToolSet, agent string) *ToolSet {
	switch {
	case candidate == nil:
		return nil
	case stable != nil && candidate.Digest == stable.Digest:
		return candidate
	}
	own := *candidate
	own.configMap = CandidateToolsConfigMapName(agent)
	return &own
}

// toolSecretNames are the Secrets the registry's bearer and basic
// handlers name, sorted, without duplicates.
func toolSecretNames(spec *omniav1.ToolRegistrySpec) []string {
	seen := map[string]bool{}
	var out []string
	for i := range spec.Handlers {
		a := spec.Handlers[i].EffectiveAuth()
		if a == nil || a.SecretRef == nil || (a.Type != omniav1.ToolAuthBearer && a.Type != omniav1.ToolAuthBasic) {
			continue
		}
		if !seen[a.SecretRef.Name] {
			seen[a.SecretRef.Name] = true
			out = append(out, a.SecretRef.Name)
		}
	}
	sort.Strings(out)
	return out
}

// toolInputs reads what the agent's tool set needs besides the registry:
// the ToolPolicies that select it and the Secrets its handlers name. The
// Secrets come from the cache, which holds only those labelled for use
// (kubeutil.SecretSelector); one not found is judged by BuildToolSet.
func (r *Reconciler) toolInputs(ctx context.Context, in *Inputs) error {
	tr := in.Registry
	if tr == nil {
		return nil
	}
	var pols omniav1.ToolPolicyList
	if err := r.Client.List(ctx, &pols, client.InNamespace(tr.Namespace), client.MatchingFields{index.ToolPolicyRegistry: tr.Name}); err != nil {
		return fmt.Errorf("list ToolPolicies of %s/%s: %w", tr.Namespace, tr.Name, err)
	}
	in.ToolPolicies = pols.Items
	for _, name := range toolSecretNames(&tr.Spec) {
		s := &corev1.Secret{}
		found, err := r.get(ctx, tr.Namespace, name, s)
		if err != nil {
			return err
		}
		if found {
			in.Secrets[name] = s
		}
	}
	return nil
}
