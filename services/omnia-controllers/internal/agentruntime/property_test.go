package agentruntime

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// versionPool mixes equal precedence, prereleases and releases.
var versionPool = []string{"0.9.0", "1.0.0", "v1.0.0", "1.1.0-rc.1", "1.1.0", "2.0.0"}

// genAgent draws an AgentRuntime as the CRD admits it: any mode with its
// facades, a pack reference by version, track or neither, tool registry
// and provider references in and out of its namespace, runtime and pod
// settings (volumes valid and not), autoscaling, idle settings, and a
// stored status with any conditions, sessions and activity.
func genAgent(r *rand.Rand) *omniav1.AgentRuntime {
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", Generation: int64(1 + r.IntN(4))}}
	if pt.Chance(r, 0.3) {
		a.Annotations = map[string]string{}
		if pt.Chance(r, 0.7) {
			a.Annotations[omniav1.AnnotationWakeRequestedAt] = pt.Pick(r, "", "2026-11-29T10:00:00Z", "later")
		}
		if pt.Chance(r, 0.3) {
			a.Annotations[omniav1.AnnotationMockProvider] = "true"
		}
	}
	spec := &a.Spec
	if pt.Chance(r, 0.25) {
		spec.Mode = omniav1.AgentModeFunction
		spec.InputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
		spec.OutputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
		spec.Facades = []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeREST}}
		if pt.Chance(r, 0.4) {
			spec.Facades = append(spec.Facades, omniav1.FacadeConfig{Type: omniav1.FacadeTypeMCP})
		}
	} else {
		if pt.Chance(r, 0.5) {
			spec.Mode = omniav1.AgentModeAgent
		}
		for _, ft := range []omniav1.FacadeType{omniav1.FacadeTypeWebSocket, omniav1.FacadeTypeA2A, omniav1.FacadeTypeCustom} {
			if len(spec.Facades) == 0 || pt.Chance(r, 0.3) {
				spec.Facades = append(spec.Facades, omniav1.FacadeConfig{Type: ft})
			}
		}
	}
	for i := range spec.Facades {
		spec.Facades[i].Port = pt.MaybePtr(r, 0.4, int32(pt.Pick(r, 1, 8080, 8080, 9000, 65535)))
	}
	r.Shuffle(len(spec.Facades), func(i, j int) { spec.Facades[i], spec.Facades[j] = spec.Facades[j], spec.Facades[i] })

	spec.PromptPackRef = omniav1.PromptPackRef{Name: "support"}
	switch r.IntN(4) {
	case 0:
		spec.PromptPackRef.Version = pt.Ptr(pt.Pick(r, versionPool...))
	case 1:
		spec.PromptPackRef.Track = pt.Ptr(pt.Pick(r, omniav1.ChannelStable, omniav1.ChannelPrerelease))
	case 2:
		if pt.Chance(r, 0.05) { // stored before the CEL rule refused both
			spec.PromptPackRef.Version, spec.PromptPackRef.Track = pt.Ptr("1.0.0"), pt.Ptr(omniav1.ChannelStable)
		}
	}
	if pt.Chance(r, 0.5) {
		spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools", Namespace: pt.MaybePtr(r, 0.3, pt.Pick(r, "", "ns", "other"))}
	}
	for _, name := range []string{"default", "embed", "voice"} {
		if len(spec.Providers) > 0 && !pt.Chance(r, 0.2) || len(spec.Providers) == 0 && !pt.Chance(r, 0.7) {
			continue
		}
		e := omniav1.NamedProviderRef{Name: name, ProviderRef: omniav1.ProviderRef{Name: pt.Pick(r, "llm", "emb", "tts"),
			Namespace: pt.MaybePtr(r, 0.1, pt.Pick(r, "", "ns", "other"))}}
		if pt.Chance(r, 0.5) {
			e.Role = pt.Pick(r, omniav1.ProviderRoleLLM, omniav1.ProviderRoleLLM, omniav1.ProviderRoleLLM, omniav1.ProviderRoleEmbedding)
		}
		for _, c := range []omniav1.ProviderCapability{omniav1.CapabilityTools, omniav1.CapabilityStreaming} {
			if pt.Chance(r, 0.15) {
				e.RequiredCapabilities = append(e.RequiredCapabilities, c)
			}
		}
		spec.Providers = append(spec.Providers, e)
	}
	if pt.Chance(r, 0.6) {
		rt := &omniav1.RuntimeConfig{Replicas: pt.MaybePtr(r, 0.6, int32(r.IntN(6)))}
		if pt.Chance(r, 0.4) {
			rt.Autoscaling = genAutoscaling(r)
		}
		if pt.Chance(r, 0.2) {
			rt.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pt.Pick(r, "500m", "1000m", "1"))}}
		}
		if pt.Chance(r, 0.2) {
			rt.NodeSelector = map[string]string{"pool": "agents"}
		}
		if pt.Chance(r, 0.3) {
			rt.ExtraEnv = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
		}
		rt.Volumes, rt.VolumeMounts = genVolumes(r)
		spec.Runtime = rt
	}
	if pt.Chance(r, 0.4) {
		po := &omniav1.PodOverrides{ServiceAccountName: pt.Pick(r, "", "agent-sa")}
		if pt.Chance(r, 0.5) {
			po.Labels = map[string]string{"team": "a", omniav1.LabelComponent: "hijack", "app.kubernetes.io/instance": "other"}
		}
		if pt.Chance(r, 0.5) {
			po.Annotations = map[string]string{"note": "x", omniav1.AnnotationConfigHash: "forced"}
		}
		if pt.Chance(r, 0.3) {
			po.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}
		po.ExtraVolumes, po.ExtraVolumeMounts = genVolumes(r)
		spec.PodOverrides = po
	}
	if pt.Chance(r, 0.3) {
		spec.ExtraPodAnnotations = map[string]string{"prometheus.io/scrape": "true"}
	}
	if pt.Chance(r, 0.3) {
		spec.ServiceGroup = pt.Pick(r, "default", "batch")
	}
	if pt.Chance(r, 0.15) {
		spec.Framework = &omniav1.FrameworkConfig{Type: pt.Pick(r, omniav1.FrameworkPromptKit, "langgraph"), Image: pt.Pick(r, "", "img:1")}
	}
	if pt.Chance(r, 0.6) {
		spec.IdleTimeout = &metav1.Duration{Duration: pt.Duration(r)}
		if pt.Chance(r, 0.5) {
			spec.IdleAction = pt.Pick(r, omniav1.IdleScaleToZero, omniav1.IdleDelete, omniav1.IdleDelete)
		}
	}
	a.Status = genAgentStatus(r, a)
	return a
}

func genAutoscaling(r *rand.Rand) *omniav1.AutoscalingConfig {
	as := &omniav1.AutoscalingConfig{Enabled: pt.Chance(r, 0.7), Type: pt.Pick(r, "", omniav1.AutoscalerHPA, omniav1.AutoscalerKEDA)}
	if pt.Chance(r, 0.6) {
		as.MaxReplicas = pt.Ptr(int32(1 + r.IntN(10)))
	}
	if pt.Chance(r, 0.6) {
		lo := int32(1)
		if as.Type == omniav1.AutoscalerKEDA || !as.Enabled {
			lo = 0
		}
		hi := int32(10)
		if as.MaxReplicas != nil {
			hi = *as.MaxReplicas
		}
		as.MinReplicas = pt.Ptr(lo + int32(r.IntN(int(hi-lo)+1)))
	}
	as.TargetMemoryUtilizationPercentage = pt.MaybePtr(r, 0.3, int32(1+r.IntN(100)))
	as.ScaleDownStabilizationSeconds = pt.MaybePtr(r, 0.3, int32(r.IntN(3601)))
	return as
}

// genVolumes draws pod volumes and mounts, now and then one the
// controller must refuse (a bad name, the reserved name, a duplicate, an
// unknown field, a mount of no volume).
func genVolumes(r *rand.Rand) ([]apiextensionsv1.JSON, []corev1.VolumeMount) {
	if !pt.Chance(r, 0.4) {
		return nil, nil
	}
	vols := []apiextensionsv1.JSON{{Raw: []byte(`{"name":"cache","emptyDir":{}}`)}}
	mounts := []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	if pt.Chance(r, 0.3) {
		vols = append(vols, apiextensionsv1.JSON{Raw: []byte(pt.Pick(r, `{"name":"Bad_Name","emptyDir":{}}`, `{"name":"promptpack","emptyDir":{}}`,
			`{"name":"cache","emptyDir":{}}`, `{"name":"extra","emptyDir":{},"bogus":1}`, `{"name":"cfg","configMap":{"name":"cfg"}}`))})
	}
	if pt.Chance(r, 0.2) {
		mounts = append(mounts, corev1.VolumeMount{Name: pt.Pick(r, "missing", "cfg"), MountPath: "/m"})
	}
	return vols, mounts
}

// genAgentStatus draws a stored status for the idle rules: Ready and Idle
// conditions in any state (a reaped agent with a current or stale wake
// mark among them), open sessions, last activity.
func genAgentStatus(r *rand.Rand, a *omniav1.AgentRuntime) omniav1.AgentRuntimeStatus {
	st := omniav1.AgentRuntimeStatus{ObservedGeneration: int64(r.IntN(4))}
	st.Conditions = pt.Conditions(r, 0.3, omniav1.ConditionPromptPackReady, omniav1.ConditionProviderReady, omniav1.ConditionToolRegistryReady, "SomeOtherCondition")
	if pt.Chance(r, 0.7) {
		c := pt.Condition(r, omniav1.ConditionReady, omniav1.ReasonRuntimeReady, omniav1.ReasonRuntimeNotReady)
		c.Status = pt.Pick(r, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse)
		st.Conditions = append(st.Conditions, c)
	}
	switch r.IntN(4) {
	case 0: // reaped: Idle=True with the wake mark of its annotation, or another
		ann := a.Annotations
		if pt.Chance(r, 0.3) {
			ann = map[string]string{omniav1.AnnotationWakeRequestedAt: "earlier"}
		}
		c := pt.Condition(r, omniav1.ConditionIdle)
		c.Status, c.Reason = metav1.ConditionTrue, omniav1.ReasonIdleTimeoutExceeded
		c.Message = "no session for 10m0s; scaled to zero until the spec or the annotation changes " + wakeMarkPrefix + wakeMark(ann) + ")"
		c.ObservedGeneration = a.Generation - int64(r.IntN(2))
		st.Conditions = append(st.Conditions, c)
	case 1:
		st.Conditions = append(st.Conditions, pt.Condition(r, omniav1.ConditionIdle, omniav1.ReasonActive, omniav1.ReasonWakeRequested, omniav1.ReasonIdleTimeoutExceeded))
	}
	if pt.Chance(r, 0.5) {
		st.ActiveSessions = pt.Ptr(int32(pt.Pick(r, 0, 0, 0, 1, 3)))
	}
	st.LastActivityTime = pt.MaybeTime(r, 0.5)
	return st
}

// genInputs draws everything Resolve reads: the agent, the versions of
// its pack, its registry, Providers and their Secrets, and a Workspace.
func genInputs(r *rand.Rand) Inputs {
	a := genAgent(r)
	in := Inputs{Agent: a, Providers: map[string]*omniav1.Provider{}, Secrets: map[string]*corev1.Secret{}}
	for i := range 1 + r.IntN(4) {
		p := omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pp-%d", i), Namespace: "ns",
			CreationTimestamp: metav1.NewTime(pt.Epoch.Add(time.Duration(r.IntN(3)) * time.Minute))},
			Spec: omniav1.PromptPackSpec{PackName: "support", Version: pt.Pick(r, versionPool...)}}
		if pt.Chance(r, 0.15) {
			p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://authoring/pack.json"}}
		} else {
			p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: p.Name}}
		}
		p.Status.Phase = pt.Pick(r, omniav1.PromptPackPhaseActive, omniav1.PromptPackPhaseActive, omniav1.PromptPackPhaseSuperseded,
			omniav1.PromptPackPhaseFailed, omniav1.PromptPackPhasePending, "")
		p.Status.ContentDigest = "sha256:" + p.Name
		p.Status.Conditions = pt.Conditions(r, 0.15, omniav1.ConditionSchemaValid)
		if v := a.Spec.PromptPackRef.Version; i == 0 && v != nil && pt.Chance(r, 0.7) {
			p.Spec.Version, p.Status.Phase = *v, omniav1.PromptPackPhaseActive // the pinned version exists
		}
		in.Packs = append(in.Packs, p)
	}
	if pt.Chance(r, 0.05) {
		in.Packs = nil
	}
	if ref := a.Spec.ToolRegistryRef; ref != nil && pt.Chance(r, 0.8) && (ref.Namespace == nil || *ref.Namespace == "" || *ref.Namespace == "ns") {
		in.Registry = &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: int64(1 + r.IntN(3))},
			Status: omniav1.ToolRegistryStatus{Phase: pt.Pick(r, omniav1.ToolRegistryPhaseReady, omniav1.ToolRegistryPhaseFailed, ""), DiscoveredToolsCount: int32(r.IntN(4))}}
	}
	for _, e := range a.Spec.Providers {
		if ns := e.ProviderRef.Namespace; ns != nil && *ns != "" && *ns != "ns" {
			continue
		}
		key := ProviderKey(a, e.ProviderRef)
		if _, seen := in.Providers[key]; seen {
			continue
		}
		if pt.Chance(r, 0.1) {
			in.Providers[key] = nil
			continue
		}
		p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: e.ProviderRef.Name, Namespace: "ns"},
			Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock, Model: "m", Role: e.Role}}
		if pt.Chance(r, 0.1) {
			p.Spec.Role = pt.Pick(r, omniav1.ProviderRoleEmbedding, omniav1.ProviderRoleTTS)
		}
		if pt.Chance(r, 0.8) {
			p.Spec.Capabilities = []omniav1.ProviderCapability{omniav1.CapabilityText, omniav1.CapabilityTools, omniav1.CapabilityStreaming}
		}
		switch r.IntN(3) {
		case 0:
			p.Spec.Type = omniav1.ProviderTypeOpenAI
			p.Spec.Credential = &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "key-" + p.Name}}
			if pt.Chance(r, 0.8) {
				in.Secrets["key-"+p.Name] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key-" + p.Name, Namespace: "ns"},
					Data: map[string][]byte{pt.Pick(r, "OPENAI_API_KEY", "api-key", "other"): []byte("sk"), "extra": []byte("x")}}
			}
		case 1:
			p.Spec.Credential = &omniav1.CredentialConfig{EnvVar: "LLM_KEY"}
		}
		p.Status.Phase = pt.Pick(r, omniav1.ProviderPhaseReady, omniav1.ProviderPhaseReady, omniav1.ProviderPhaseReady, omniav1.ProviderPhaseReady, omniav1.ProviderPhaseError, "")
		in.Providers[key] = p
	}
	if pt.Chance(r, 0.4) {
		ws := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "ns"}}}
		if pt.Chance(r, 0.6) {
			ws.Spec.Runtime = &omniav1.WorkspaceRuntime{ServiceAccountName: pt.Pick(r, "", "team-sa"),
				PodLabels:      map[string]string{"tenant": "team", omniav1.LabelTrack: "hijack"},
				PodAnnotations: map[string]string{"tenant": "team", omniav1.AnnotationConfigHash: "forced"}}
		}
		if pt.Chance(r, 0.5) {
			ws.Spec.Services = []omniav1.WorkspaceServiceGroup{{Name: pt.Pick(r, "default", "batch"), Autoscaling: genAutoscaling(r)}}
		}
		in.Workspace = ws
	}
	// The agent is read from the cache: a stored object.
	in.Agent = pt.Cached(a)
	return in
}

// TestResolveProperties checks Resolve on random agents and inputs:
//
//   - no input makes it panic, and it leaves its inputs as they were;
//   - the same input gives the same resolution, whatever order the
//     PromptPacks are listed in (every worker picks the same version);
//   - a usable resolution has a validated pack of the agent's pack name,
//     every provider entry resolved, no phase and no retry; one that is
//     not usable is Failed or Pending with PromptPackReady or
//     ProviderReady False, and a retry goes with Failed only;
//   - its conditions, stored and resolved again later, are unchanged, and
//     no event is repeated.
func TestResolveProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		in := genInputs(r)
		before := in.Agent.DeepCopy()
		packs := slices.Clone(in.Packs)
		now := pt.MetaTime(r)
		conds := slices.Clone(in.Agent.Status.Conditions)
		res := Resolve(in, &conds, now)
		if !equality.Semantic.DeepEqual(before, in.Agent) || !equality.Semantic.DeepEqual(packs, in.Packs) {
			return fmt.Errorf("Resolve changed its input: %s", pt.Diff(before, in.Agent))
		}
		shuffled := in
		shuffled.Packs = slices.Clone(in.Packs)
		r.Shuffle(len(shuffled.Packs), func(i, j int) { shuffled.Packs[i], shuffled.Packs[j] = shuffled.Packs[j], shuffled.Packs[i] })
		conds2 := slices.Clone(in.Agent.Status.Conditions)
		res2 := Resolve(shuffled, &conds2, now)
		if !equality.Semantic.DeepEqual(conds, conds2) || res.Usable != res2.Usable || res.Phase != res2.Phase || packName(res.Pack) != packName(res2.Pack) {
			return fmt.Errorf("two resolutions of one input differ: %s", pt.Diff(conds, conds2))
		}
		if err := checkResolution(in, res, conds); err != nil {
			return err
		}
		stored, err := pt.Stored(conds)
		if err != nil {
			return err
		}
		again := slices.Clone(stored)
		res3 := Resolve(in, &again, metav1.NewTime(now.Add(time.Duration(1+r.IntN(3600))*time.Second)))
		if !equality.Semantic.DeepEqual(stored, again) || len(res3.Events) > 0 {
			return fmt.Errorf("resolving the stored conditions again changes them (events %v): %s", res3.Events, pt.Diff(stored, again))
		}
		if res.Usable {
			counts.Add("usable")
			if err := checkBuild(in, res, counts); err != nil {
				return err
			}
		} else {
			counts.Add("not usable: " + string(res.Phase))
		}
		for _, c := range conds {
			if c.Status == metav1.ConditionFalse && (c.Type == omniav1.ConditionPromptPackReady || c.Type == omniav1.ConditionProviderReady || c.Type == omniav1.ConditionToolRegistryReady) {
				counts.Add(c.Type + " False")
			}
		}
		return nil
	})
	counts.Require(t, 0.02, "usable", "not usable: Failed", "not usable: Pending", "PromptPackReady False", "ProviderReady False", "ToolRegistryReady False",
		"built", "volumes refused", "autoscaled")
}

func packName(p *omniav1.PromptPack) string {
	if p == nil {
		return ""
	}
	return p.Name
}

func checkResolution(in Inputs, res Resolution, conds []metav1.Condition) error {
	pack := meta.FindStatusCondition(conds, omniav1.ConditionPromptPackReady)
	prov := meta.FindStatusCondition(conds, omniav1.ConditionProviderReady)
	if res.Usable {
		if res.Retry != nil {
			return fmt.Errorf("usable, yet retried: %w", res.Retry)
		}
		if res.Phase != "" || res.Pack == nil || res.Pack.Spec.PackName != in.Agent.Spec.PromptPackRef.Name {
			return fmt.Errorf("usable with phase %q, pack %v", res.Phase, packName(res.Pack))
		}
		if !res.Pack.IsLive() && res.Pack.Status.Phase != omniav1.PromptPackPhaseActive && res.Pack.Status.Phase != omniav1.PromptPackPhaseSuperseded {
			return fmt.Errorf("usable with pack %s in phase %q", res.Pack.Name, res.Pack.Status.Phase)
		}
		if pack == nil || pack.Status != metav1.ConditionTrue {
			return fmt.Errorf("usable with PromptPackReady %+v", pack)
		}
		if len(res.Providers) != len(in.Agent.Spec.Providers) || len(in.Agent.Spec.Providers) > 0 && (prov == nil || prov.Status != metav1.ConditionTrue) {
			return fmt.Errorf("usable with %d of %d providers, ProviderReady %+v", len(res.Providers), len(in.Agent.Spec.Providers), prov)
		}
		return nil
	}
	if res.Phase != omniav1.AgentRuntimePhaseFailed && res.Phase != omniav1.AgentRuntimePhasePending {
		return fmt.Errorf("not usable with phase %q", res.Phase)
	}
	blocks := func(c *metav1.Condition) bool {
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == in.Agent.Generation
	}
	if !blocks(pack) && !blocks(prov) {
		return fmt.Errorf("not usable, yet neither PromptPackReady %+v nor ProviderReady %+v is False", pack, prov)
	}
	if res.Retry != nil && res.Phase != omniav1.AgentRuntimePhaseFailed {
		return fmt.Errorf("retry in phase %s: %w", res.Phase, res.Retry)
	}
	return nil
}

// checkBuild builds the objects of a usable resolution twice and holds
// them to what applying them relies on: the same inputs build the same
// objects (so the applied hash does not change), the stored form of each
// desired object is no drift from it (so an unedited object is not
// written again on the next pass), the selector matches the pod labels,
// and the replica count is the spec's unless an autoscaler owns it.
func checkBuild(in Inputs, res Resolution, counts pt.Counts) error {
	d1, err1 := BuildDeployment(in, res, testConfig, "img")
	d2, err2 := BuildDeployment(in, res, testConfig, "img")
	if (err1 == nil) != (err2 == nil) {
		return fmt.Errorf("of two builds of one input only one fails: %w", cmp.Or(err1, err2))
	}
	if err1 != nil {
		if err1.Error() != err2.Error() {
			return fmt.Errorf("two builds fail differently: %w, %w", err1, err2)
		}
		counts.Add("volumes refused")
		return nil
	}
	counts.Add("built")
	if AppliedHash(d1.Spec) != AppliedHash(d2.Spec) || !equality.Semantic.DeepEqual(d1, d2) {
		return fmt.Errorf("two builds of one input differ: %s", pt.Diff(d1, d2))
	}
	live, err := pt.Stored(*d1)
	if err != nil {
		return err
	}
	floor := autoscalerFloor(in)
	if deploymentDrifted(d1, &live, replicasToWrite(d1.Spec.Replicas, live.Spec.Replicas, floor)) {
		return fmt.Errorf("the Deployment as stored drifts from the one desired")
	}
	for k, v := range d1.Spec.Selector.MatchLabels {
		if d1.Spec.Template.Labels[k] != v {
			return fmt.Errorf("selector %s=%s does not match the pod label %q", k, v, d1.Spec.Template.Labels[k])
		}
	}
	if d1.Spec.Template.Annotations[omniav1.AnnotationConfigHash] == "" {
		return fmt.Errorf("pod template without the config hash")
	}
	switch {
	case autoscaled(in):
		counts.Add("autoscaled")
		if d1.Spec.Replicas != nil {
			return fmt.Errorf("autoscaled, yet the Deployment sets %d replicas", *d1.Spec.Replicas)
		}
	case d1.Spec.Replicas == nil:
		return fmt.Errorf("not autoscaled, yet the Deployment sets no replica count")
	}
	svc := BuildService(in.Agent)
	sl, err := pt.Stored(*svc)
	if err != nil {
		return fmt.Errorf("the Service does not store: %w", err)
	}
	if serviceDrifted(svc, &sl) || !reflect.DeepEqual(svc, BuildService(in.Agent)) {
		return fmt.Errorf("the Service is not stable or drifts as stored")
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != primaryPort(in.Agent) {
		return fmt.Errorf("Service ports %+v, the primary facade's first", svc.Spec.Ports)
	}
	if h := BuildHPA(in); h != nil {
		hl, err := pt.Stored(*h)
		if err != nil {
			return fmt.Errorf("the HPA does not store: %w", err)
		}
		if hpaDrifted(h, &hl) || !equality.Semantic.DeepEqual(h, BuildHPA(in)) {
			return fmt.Errorf("the HPA is not stable or drifts as stored")
		}
		if *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			return fmt.Errorf("HPA scales %d to %d", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
	return nil
}

// applyIdle records an idle decision in the status as the reconciler
// does: the Idle condition, and Ready=False while held at zero.
func applyIdle(a *omniav1.AgentRuntime, d idleDecision, now metav1.Time) {
	st := &a.Status
	switch {
	case d.Remove:
		meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionIdle)
	case d.Cond != nil:
		kubeutil.SetCondition(&st.Conditions, a.Generation, now, omniav1.ConditionIdle, d.Cond.Status, d.Cond.Reason, d.Cond.Message)
	}
	if d.Plan.ScaleToZero {
		holdAtZero(a, st, now)
	}
}

// TestDecideIdleProperties checks the idle rules on random agents: any
// idle timeout the CRD admits (0 and sub-second ones too), either action,
// open sessions, last activity, Ready and Idle conditions in any state
// (reaped with a current or a stale wake mark, woken, active), and any
// time:
//
//   - no input makes it panic, and the same input gives the same
//     decision;
//   - a timer is never under a second (the precision of the times it
//     counts from) and never wakes before the deadline; an awake agent
//     with no session open and a deadline running always has one;
//   - only an agent past its deadline is reaped (deleted, or held at zero
//     with Idle=True), and only idleAction delete deletes;
//   - the status a pass writes, decided on again at the same time and
//     later before the deadline, is not rewritten, and IdleReaped is not
//     emitted again (after a wake, open sessions or newer activity may
//     supersede WakeRequested once, as the rules say; then nothing
//     changes).
func TestDecideIdleProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		a := genAgent(r)
		now := pt.Time(r)
		if pt.Chance(r, 0.5) && a.Status.LastActivityTime != nil {
			// Near the deadline, where the timer is shortest.
			if a.Spec.IdleTimeout != nil {
				now = a.Status.LastActivityTime.Add(a.Spec.IdleTimeout.Duration).Truncate(time.Second).Add(-time.Duration(r.IntN(3)) * time.Second)
			}
		}
		d := decideIdle(a.Generation, a.Annotations, &a.Spec, &a.Status, now)
		if again := decideIdle(a.Generation, a.Annotations, &a.Spec, &a.Status, now); !reflect.DeepEqual(d, again) {
			return fmt.Errorf("two decisions on one input differ: %+v, %+v", d, again)
		}
		if err := checkIdle(a, d, now); err != nil {
			return err
		}
		counts.Add(idleOutcome(d))
		if d.Delete || d.Remove {
			return nil
		}
		applyIdle(a, d, metav1.NewTime(now))
		stored, err := pt.Stored(*a)
		if err != nil {
			return err
		}
		woke := d.Cond != nil && d.Cond.Reason == omniav1.ReasonWakeRequested
		if woke && a.Spec.IdleTimeout.Duration < time.Second {
			// A woken agent whose timeout is under a second is idle again
			// by the next pass: reaping it then is the configured rule.
			return nil
		}
		later := []time.Time{now}
		if d.Plan.RequeueAfter > time.Second {
			later = append(later, now.Add(time.Duration(r.Int64N(int64(d.Plan.RequeueAfter/time.Second)))*time.Second))
		} else if d.Plan.ScaleToZero {
			later = append(later, now.Add(time.Duration(r.IntN(86400))*time.Second))
		}
		if woke {
			// The rules let open sessions or activity newer than the wake
			// supersede WakeRequested on the next pass (a status no pass
			// of this controller leads to: the agent was reaped with no
			// session open and no activity since). One such write, then
			// none.
			b := stored.DeepCopy()
			d2 := decideIdle(b.Generation, b.Annotations, &b.Spec, &b.Status, now)
			if d2.Cond != nil && d2.Cond.Reason == omniav1.ReasonActive {
				counts.Add("woken: superseded by sessions or newer activity")
				applyIdle(b, d2, metav1.NewTime(now))
				if stored, err = pt.Stored(*b); err != nil {
					return err
				}
			}
		}
		for _, at := range later {
			b := stored.DeepCopy()
			d2 := decideIdle(b.Generation, b.Annotations, &b.Spec, &b.Status, at)
			if d2.Reaped || d2.Delete {
				return fmt.Errorf("reaped again at %s after %s", at, idleOutcome(d))
			}
			applyIdle(b, d2, metav1.NewTime(at))
			if !equality.Semantic.DeepEqual(stored.Status, b.Status) {
				return fmt.Errorf("%s, decided again at +%s, rewrites the status: %s", idleOutcome(d), at.Sub(now), pt.Diff(stored.Status, b.Status))
			}
		}
		return nil
	})
	counts.Require(t, 0.02, "no idle timeout", "reaped: delete", "reaped: scale to zero", "held at zero", "woken", "timer", "sessions open", "no timer yet")
}

func idleOutcome(d idleDecision) string {
	switch {
	case d.Remove:
		return "no idle timeout"
	case d.Delete:
		return "reaped: delete"
	case d.Reaped:
		return "reaped: scale to zero"
	case d.Plan.ScaleToZero:
		return "held at zero"
	case d.Cond != nil && d.Cond.Reason == omniav1.ReasonWakeRequested:
		return "woken"
	case d.Plan.RequeueAfter > 0:
		return "timer"
	case d.Cond != nil && strings.Contains(d.Cond.Message, "session(s) open"):
		return "sessions open"
	}
	return "no timer yet"
}

func checkIdle(a *omniav1.AgentRuntime, d idleDecision, now time.Time) error {
	if a.Spec.IdleTimeout == nil {
		if !d.Remove || d.Plan != (idlePlan{}) || d.Delete || d.Reaped {
			return fmt.Errorf("without idleTimeout: %+v", d)
		}
		return nil
	}
	if d.Plan.RequeueAfter < 0 || d.Plan.RequeueAfter > 0 && d.Plan.RequeueAfter < minIdleRequeue {
		return fmt.Errorf("idle timer of %s, under %s", d.Plan.RequeueAfter, minIdleRequeue)
	}
	if d.Delete && (!d.Reaped || a.Spec.EffectiveIdleAction() != omniav1.IdleDelete) {
		return fmt.Errorf("deletes with idleAction %q: %+v", a.Spec.IdleAction, d)
	}
	if d.Reaped && !d.Delete && (!d.Plan.ScaleToZero || d.Cond == nil || d.Cond.Status != metav1.ConditionTrue) {
		return fmt.Errorf("reaped without holding at zero: %+v", d)
	}
	awake := !d.Plan.ScaleToZero && !d.Delete
	if !awake || sessions(&a.Status) > 0 {
		return nil
	}
	// The deadline's base, as the rules define it.
	var base time.Time
	if a.Status.LastActivityTime != nil {
		base = a.Status.LastActivityTime.Time
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		base = latestTime(base, c.LastTransitionTime.Time)
	}
	cur := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionIdle)
	switch {
	case d.Cond != nil && d.Cond.Reason == omniav1.ReasonWakeRequested:
		base = now
	case cur != nil && cur.Status == metav1.ConditionFalse && cur.Reason == omniav1.ReasonWakeRequested:
		base = latestTime(base, cur.LastTransitionTime.Time)
	}
	if base.IsZero() {
		return nil
	}
	deadline := base.Add(a.Spec.IdleTimeout.Duration)
	if d.Plan.RequeueAfter == 0 {
		return fmt.Errorf("awake with no session open and a deadline at %s (now %s), yet no timer: %+v", deadline, now, d)
	}
	if now.Add(d.Plan.RequeueAfter).Before(deadline) {
		return fmt.Errorf("the timer (%s) wakes before the deadline %s", d.Plan.RequeueAfter, deadline)
	}
	return nil
}

// TestNamespaceWorkspaceIsOrderFree: the Workspace an agent's namespace
// gets does not depend on the order the cache lists the candidates in.
func TestNamespaceWorkspaceIsOrderFree(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		var wss []omniav1.Workspace
		for i := range r.IntN(5) {
			w := omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ws-%d", i),
				CreationTimestamp: metav1.NewTime(pt.Epoch.Add(time.Duration(r.IntN(3)) * time.Minute))}}
			w.Status.Conditions = pt.Conditions(r, 0.7, omniav1.ConditionNamespaceReady)
			if pt.Chance(r, 0.1) {
				w.DeletionTimestamp = pt.MaybeTime(r, 1)
			}
			wss = append(wss, w)
		}
		name := func(w *omniav1.Workspace) string {
			if w == nil {
				return ""
			}
			return w.Name
		}
		first := name(NamespaceWorkspace(wss)) // a pointer into wss, which the shuffle moves
		r.Shuffle(len(wss), func(i, j int) { wss[i], wss[j] = wss[j], wss[i] })
		if second := name(NamespaceWorkspace(wss)); first != second {
			return fmt.Errorf("the pick depends on the order: %q, %q", first, second)
		}
		if first == "" {
			counts.Add("none applies")
		} else {
			counts.Add("one picked")
		}
		return nil
	})
	counts.Require(t, 0.05, "none applies", "one picked")
}

// TestJWKSFreshForBounds: the time a mirrored key set stays fresh is
// between zero and JWKSRefresh and, with the stored fetch time and the
// clock at second precision, a whole number of seconds.
func TestJWKSFreshForBounds(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		now := pt.Time(r)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			omniav1.AnnotationOIDCJWKSFetchedAt: now.Add(-time.Duration(r.IntN(14*3600)-2*3600) * time.Second).Format(time.RFC3339)}},
			Data: map[string][]byte{JWKSKey: []byte(pt.Pick(r, testKeySet, testKeySet, `{"keys":[]}`, `nope`))}}
		left := jwksFreshFor(s, now)
		if left < 0 || left > JWKSRefresh || left%time.Second != 0 {
			return fmt.Errorf("fresh for %s", left)
		}
		if left > 0 {
			counts.Add("fresh")
		} else {
			counts.Add("to fetch")
		}
		return nil
	})
	counts.Require(t, 0.05, "fresh", "to fetch")
}
