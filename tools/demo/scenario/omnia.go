package scenario

import (
	"context"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// OmniaRuntime is the demo's AgentRuntime: a long-lived assistant built
// from a PromptPack (docs/omnia-controllers.md), two replicas, which rolls
// out each new stable version of its pack step by step.
const OmniaRuntime = "tides-assistant"

// The pack the runtime serves, its first version, and the version the
// demo publishes next.
const (
	omniaPack        = "tides"
	OmniaFirstPack   = "1.0.0"
	OmniaNextPack    = "1.1.0"
	omniaProvider    = "demo-llm"
	omniaReplicas    = 2
	omniaCanaryShare = 50
	// omniaCanaryReplicas is the candidate's share of the replicas, as
	// replicaWeighted traffic routing splits them.
	omniaCanaryReplicas = omniaReplicas * omniaCanaryShare / 100
)

// OmniaPause is how long the rollout holds the candidate at half the
// replicas before it promotes it.
const OmniaPause = 10 * time.Second

// OmniaStage is one step of the AgentRuntime that the demo waits for and
// shows, and the e2e suite asserts, in order.
type OmniaStage struct {
	What    string
	Reached func(s OmniaState) bool
	Show    func(s OmniaState) string
}

// OmniaState is what a stage is judged on: the AgentRuntime and its two
// Deployments' replicas (-1 for a Deployment that does not exist).
type OmniaState struct {
	Runtime                        *omniav1.AgentRuntime
	StableReplicas, CanaryReplicas int32
	StableVersion, CanaryVersion   string
	StableReady, CanaryReady       int32
}

// ReadOmnia reads the state of OmniaRuntime in ns.
func ReadOmnia(ctx context.Context, c client.Client, ns string) (OmniaState, error) {
	s := OmniaState{Runtime: &omniav1.AgentRuntime{}, StableReplicas: -1, CanaryReplicas: -1}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: OmniaRuntime}, s.Runtime); err != nil {
		return s, err
	}
	for _, d := range []struct {
		name            string
		replicas, ready *int32
		version         *string
	}{{OmniaRuntime, &s.StableReplicas, &s.StableReady, &s.StableVersion}, {OmniaRuntime + "-canary", &s.CanaryReplicas, &s.CanaryReady, &s.CanaryVersion}} {
		dep := &appsv1.Deployment{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: d.name}, dep)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return s, err
		}
		*d.replicas, *d.ready = 0, dep.Status.ReadyReplicas
		if dep.Spec.Replicas != nil {
			*d.replicas = *dep.Spec.Replicas
		}
		*d.version = packVersionOf(dep)
	}
	return s, nil
}

// packVersionOf is the pack version a Deployment's runtime container is
// given (OMNIA_PROMPTPACK_VERSION).
func packVersionOf(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "OMNIA_PROMPTPACK_VERSION" {
				return e.Value
			}
		}
	}
	return ""
}

// pinned is the pack version the AgentRuntime's spec pins.
func pinned(a *omniav1.AgentRuntime) string {
	if v := a.Spec.PromptPackRef.Version; v != nil {
		return *v
	}
	return ""
}

func (s OmniaState) rollout() *omniav1.RolloutStatus {
	if s.Runtime.Status.Rollout == nil {
		return &omniav1.RolloutStatus{}
	}
	return s.Runtime.Status.Rollout
}

// Describe says how many replicas of each Deployment are ready, on which pack version.
func (s OmniaState) Describe() string {
	out := fmt.Sprintf("Deployment %s: %d/%d ready (pack %s)", OmniaRuntime, s.StableReady, s.StableReplicas, s.StableVersion)
	if s.CanaryReplicas >= 0 {
		out += fmt.Sprintf(", %s-canary: %d/%d ready (pack %s)", OmniaRuntime, s.CanaryReady, s.CanaryReplicas, s.CanaryVersion)
	}
	return out
}

// OmniaRunning is the stage the AgentRuntime reaches on its first pack.
var OmniaRunning = OmniaStage{"Running on pack " + omniaPack + " " + OmniaFirstPack,
	func(s OmniaState) bool {
		return s.Runtime.Status.Phase == omniav1.AgentRuntimePhaseRunning && s.StableVersion == OmniaFirstPack
	},
	func(s OmniaState) string { return string(s.Runtime.Status.Phase) + "; " + s.Describe() }}

// OmniaRolloutStages are the steps of the rollout of OmniaNextPack: the
// trigger makes it the candidate, which gets half the replicas in its
// own Deployment, then is promoted into the spec, and the candidate
// Deployment goes once the stable one runs it everywhere.
var OmniaRolloutStages = []OmniaStage{
	{"triggered: pack " + OmniaNextPack + " is the candidate",
		func(s OmniaState) bool {
			return s.rollout().CandidateVersion == OmniaNextPack || pinned(s.Runtime) == OmniaNextPack
		},
		func(s OmniaState) string { return "status.rollout: " + s.rollout().Message }},
	{fmt.Sprintf("setWeight %d: the candidate runs %d of the %d replicas, in %s-canary", omniaCanaryShare, omniaCanaryReplicas, omniaReplicas, OmniaRuntime),
		func(s OmniaState) bool {
			// The split holds for the whole pause that follows, however
			// long the candidate's pod takes to become ready.
			w := s.rollout().CurrentWeight
			return s.CanaryVersion == OmniaNextPack && s.CanaryReplicas == omniaCanaryReplicas &&
				s.StableReplicas == omniaReplicas-omniaCanaryReplicas && w != nil && *w == omniaCanaryShare
		},
		func(s OmniaState) string { return s.Describe() }},
	{"pause of " + OmniaPause.String() + " over: the candidate promoted into spec.promptPackRef",
		func(s OmniaState) bool { return pinned(s.Runtime) == OmniaNextPack },
		func(s OmniaState) string { return "spec.promptPackRef.version " + pinned(s.Runtime) }},
	{"rolled out: every replica on pack " + OmniaNextPack + ", the candidate Deployment gone",
		func(s OmniaState) bool {
			ro := s.rollout()
			return pinned(s.Runtime) == OmniaNextPack && !ro.Active && s.CanaryReplicas < 0 &&
				s.StableVersion == OmniaNextPack && s.StableReady == omniaReplicas && s.Runtime.Status.Phase == omniav1.AgentRuntimePhaseRunning
		},
		func(s OmniaState) string { return string(s.Runtime.Status.Phase) + "; " + s.Describe() }},
}

// packJSON is a pack.json of the published PromptPack schema.
func packJSON(version string) string {
	return `{"id":"` + omniaPack + `","name":"Tides","version":"` + version + `",` +
		`"template_engine":{"version":"v1","syntax":"{{variable}}"},` +
		`"prompts":{"default":{"id":"default","name":"Default","version":"` + version + `","system_template":"You explain the tides."}}}`
}

// createPack creates version of the pack: its ConfigMap and PromptPack.
func createPack(ctx context.Context, c client.Client, ns, version string, out io.Writer) error {
	name := omniaPack + "-" + version
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: packJSON(version)}}
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: omniaPack, Version: version,
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}}}
	for _, obj := range []client.Object{cm, p} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "  applied configmap/%s (pack.json) and promptpack/%s (pack %s, version %s)\n", name, name, omniaPack, version)
	return nil
}

// ApplyOmnia creates the first pack version, a mock Provider and the
// AgentRuntime pinned to that version, with a rollout of two steps for
// the next stable version.
func ApplyOmnia(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	if err := createPack(ctx, c, ns, OmniaFirstPack, out); err != nil {
		return err
	}
	prov := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: omniaProvider, Namespace: ns}, Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock}}
	version, replicas, share := OmniaFirstPack, int32(omniaReplicas), int32(omniaCanaryShare)
	ar := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: OmniaRuntime, Namespace: ns}, Spec: omniav1.AgentRuntimeSpec{
		PromptPackRef: omniav1.PromptPackRef{Name: omniaPack, Version: &version},
		Facades:       []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}},
		Providers:     []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: omniaProvider}}},
		Runtime:       &omniav1.RuntimeConfig{Replicas: &replicas},
		Rollout: &omniav1.RolloutConfig{
			Trigger:        &omniav1.RolloutTrigger{PromptPackChannel: omniav1.ChannelStable},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
			Steps: []omniav1.RolloutStep{{SetWeight: &share},
				{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: OmniaPause}}}},
		}}}
	for _, obj := range []client.Object{prov, ar} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "  applied provider/%s (mock) and agentruntime/%s: %d replicas on pack %s %s; a new stable version rolls out in steps: %d%% of the replicas, a pause of %s, promotion\n",
		prov.Name, ar.Name, omniaReplicas, omniaPack, OmniaFirstPack, omniaCanaryShare, OmniaPause)
	return nil
}

// PublishNextPack creates OmniaNextPack, which the rollout trigger picks up
// once it is Active.
func PublishNextPack(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	return createPack(ctx, c, ns, OmniaNextPack, out)
}
