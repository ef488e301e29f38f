package jobbuild

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
)

func input() Input {
	return Input{
		Agent: &agentsv1alpha1.Agent{
			ObjectMeta: metav1.ObjectMeta{Name: "fix-42", Namespace: "team", UID: "uid-1"},
			Spec:       agentsv1alpha1.AgentSpec{StationRef: "st", TaskID: "T-1", Parameters: map[string]string{"issue": "42"}},
		},
		Station: &agentsv1alpha1.Station{
			ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: "team"},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def", DeadlineMinutes: 30, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a", agentsv1alpha1.LabelAgent: "spoofed"}},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "station-init", Image: "x"}},
					Containers: []corev1.Container{
						{Name: "agent", Image: "runner:1", Args: []string{"ignored"}, Env: []corev1.EnvVar{{Name: "LOST", Value: "1"}},
							VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "agent", MountPath: "/elsewhere"}}},
						{Name: "sidecar", Image: "proxy:1"},
					},
					Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "workspace"}},
				},
			}},
		},
		Definition: &agentsv1alpha1.AgentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "def", Namespace: "team"},
			Spec: agentsv1alpha1.AgentDefinitionSpec{
				Model: "claude-opus-5-5", Prompt: "fix {issue}",
				Resources: &agentsv1alpha1.AgentResources{
					Env:        []agentsv1alpha1.EnvEntry{{Name: "FOO", Value: "bar"}, {Name: "AGENT_SINKS", Value: "hijack"}, {Name: "HOME", Value: "/root"}},
					Secrets:    []agentsv1alpha1.SecretEnvEntry{{Name: "ANTHROPIC_API_KEY", Ref: "anthropic"}, {Name: "PATH", Ref: "p"}},
					Repos:      []agentsv1alpha1.RepoSource{{Name: "r", URL: "o/r", TokenSecret: "gh-token"}},
					MCPServers: []agentsv1alpha1.MCPServer{{Name: "lore", Transport: "http", URL: "https://lore", HeadersSecret: "lore-mcp-auth"}},
				},
				Output: &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: "http", URL: "https://hook", HeadersSecret: "hook-auth"}}},
			},
		},
		Model:  "claude-opus-5-5",
		Config: Config{SupervisorImage: "agentplane/supervisor:dev", SupervisorPath: "/supervisor", NATSURL: "nats://nats:4222"},
	}
}

func agentContainer(t *testing.T, j *batchv1.Job) corev1.Container {
	t.Helper()
	for _, c := range j.Spec.Template.Spec.Containers {
		if c.Name == "agent" {
			return c
		}
	}
	t.Fatal("no agent container")
	return corev1.Container{}
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestJobRules(t *testing.T) {
	j, err := Build(input())
	if err != nil {
		t.Fatal(err)
	}
	agent := agentContainer(t, j)
	env := envMap(agent)
	cases := []struct {
		rule string
		ok   bool
	}{
		{"the Job is named agent-job-<agent>", j.Name == "agent-job-fix-42" && j.Namespace == "team"},
		{"the Job is owned by its Agent as controller, blocking owner deletion", len(j.OwnerReferences) == 1 &&
			j.OwnerReferences[0].Kind == "Agent" && j.OwnerReferences[0].UID == "uid-1" && *j.OwnerReferences[0].Controller && *j.OwnerReferences[0].BlockOwnerDeletion},
		{"finished Jobs self-delete after an hour", *j.Spec.TTLSecondsAfterFinished == 3600},
		{"activeDeadlineSeconds is deadlineMinutes x 60", *j.Spec.ActiveDeadlineSeconds == 1800},
		{"backoffLimit is 0: a run is never retried", *j.Spec.BackoffLimit == 0},
		{"pods never restart", j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyNever},
		{"the agent container runs the supervisor", reflect.DeepEqual(agent.Command, []string{"/agent/bin/supervisor", "run"}) && agent.Args == nil},
		{"the Station's env on the agent container is replaced", env["LOST"].Name == ""},
		{"a recipe cannot override a reserved name", env["AGENT_SINKS"].Value != "hijack" && env["HOME"].Value == "/agent" && env["PATH"].ValueFrom == nil},
		{"recipe env that is not reserved passes", env["FOO"].Value == "bar"},
		{"recipe secrets come from agent-secrets by key", env["ANTHROPIC_API_KEY"].ValueFrom.SecretKeyRef.Name == "agent-secrets" && env["ANTHROPIC_API_KEY"].ValueFrom.SecretKeyRef.Key == "anthropic"},
		{"an http sink's headers_secret is injected from agent-secrets", env["hook-auth"].ValueFrom != nil && env["hook-auth"].ValueFrom.SecretKeyRef.Key == "hook-auth"},
		{"an MCP headers_secret is injected under its header env name", env["LORE_MCP_AUTH"].ValueFrom.SecretKeyRef.Key == "lore-mcp-auth"},
		{"the first repo token is aliased as GH_TOKEN", env["GH_TOKEN"].ValueFrom.SecretKeyRef.Key == "gh-token"},
		{"the deadline reaches the supervisor 10 s early", env["AGENT_DEADLINE_MS"].Value == "1790000"},
		{"the run identity is in the env", env["AGENT_NAME"].Value == "fix-42" && env["STATION_NAME"].Value == "st" && env["TASK_ID"].Value == "T-1" && env["AGENT_MODEL"].Value == "claude-opus-5-5"},
		{"the pod name comes from the downward API", env["POD_NAME"].ValueFrom.FieldRef.FieldPath == "metadata.name"},
		{"the run publishes to the controller's NATS", env["AGENT_NATS_URL"].Value == "nats://nats:4222"},
		{"parameters are passed as JSON", env["AGENT_PARAMETERS"].Value == `{"issue":"42"}`},
		{"the agent runs as non-root without privilege escalation", *agent.SecurityContext.RunAsNonRoot && *agent.SecurityContext.RunAsUser == 1000 && !*agent.SecurityContext.AllowPrivilegeEscalation},
		{"default resources are set where none are", agent.Resources.Requests.Cpu().String() == "100m" && agent.Resources.Limits.Memory().String() == "2Gi"},
		{"the Station's own mounts are kept, agent and workspace are ours", len(agent.VolumeMounts) == 3 && agent.VolumeMounts[0].Name == "cache" && agent.VolumeMounts[1].MountPath == "/agent"},
		{"the Station's init containers are replaced by the supervisor init", len(j.Spec.Template.Spec.InitContainers) == 1 &&
			reflect.DeepEqual(j.Spec.Template.Spec.InitContainers[0].Command, []string{"/supervisor", "init"}) && j.Spec.Template.Spec.InitContainers[0].Image == "agentplane/supervisor:dev"},
		{"sidecars are untouched", j.Spec.Template.Spec.Containers[1].Image == "proxy:1" && j.Spec.Template.Spec.Containers[1].Command == nil},
		{"our labels win, the Station's other labels are kept", j.Spec.Template.Labels[agentsv1alpha1.LabelAgent] == "fix-42" && j.Spec.Template.Labels["team"] == "a"},
		{"the pod is not evicted by the autoscaler", j.Spec.Template.Annotations[SafeToEvictAnnotation] == "false"},
		{"the service account token is not mounted", !*j.Spec.Template.Spec.AutomountServiceAccountToken},
		{"the Station's agent and workspace volumes are replaced by emptyDirs", len(j.Spec.Template.Spec.Volumes) == 3 && j.Spec.Template.Spec.Volumes[2].EmptyDir != nil},
		{"a job run carries no realtime label", j.Spec.Template.Labels[agentsv1alpha1.LabelExecution] == ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.ok {
				t.Errorf("rule broken; agent container: %+v", agent)
			}
		})
	}
	spec, err := runspec.Decode(env[runspec.EnvName].Value)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Prompt != "fix {issue}" || spec.Parameters["issue"] != "42" || spec.MCPServers[0].HeaderEnv != "LORE_MCP_AUTH" {
		t.Errorf("run spec: %+v", spec)
	}
}

// TestTheSupervisorReadsWhatTheJobSays reads the agent container's
// environment the way the supervisor does (runspec.Read), so a variable
// written outside the contract, or under another name, shows up here.
func TestTheSupervisorReadsWhatTheJobSays(t *testing.T) {
	in := input()
	in.Agent.Spec.TargetRepo, in.Agent.Spec.Branch = "o/r", "fix-42"
	in.Definition.Spec.Output.Select = []agentsv1alpha1.OutputSelector{{Event: agentsv1alpha1.SelectResult}}
	j, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	literal := map[string]string{}
	for _, e := range agentContainer(t, j).Env {
		if e.ValueFrom == nil {
			literal[e.Name] = e.Value
		}
	}
	literal[runspec.EnvPodName], literal[runspec.EnvPodNamespace] = "agent-job-fix-42-abcde", "team"
	got := runspec.Read(func(k string) string { return literal[k] })
	want := runspec.Env{
		RunSpec: literal[runspec.EnvName], Namespace: "team", Agent: "fix-42", UID: "uid-1", Station: "st", TaskID: "T-1",
		Model: "claude-opus-5-5", Execution: runspec.ExecutionJob, Workspace: "/workspace", Home: "/agent",
		Deadline: 30*time.Minute - 10*time.Second, ExitGrace: runspec.DefaultExitGrace, NATSURL: "nats://nats:4222",
		SinksJSON:  `[{"type":"http","url":"https://hook","headers_secret":"hook-auth"}]`,
		SelectJSON: `[{"event":"result"}]`, SkillsJSON: "[]", ReposJSON: `[{"name":"r","url":"o/r","token_secret":"gh-token"}]`,
		ParametersJSON: `{"issue":"42"}`, TargetRepo: "o/r", Branch: "fix-42", Pod: "agent-job-fix-42-abcde",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the supervisor reads\n%+v\nwant\n%+v", got, want)
	}
	if string(agentsv1alpha1.ExecutionRealtime) != runspec.ExecutionRealtime || string(agentsv1alpha1.ExecutionJob) != runspec.ExecutionJob {
		t.Error("runspec's execution values are the AgentDefinition's")
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	a, err := Build(input())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		b, _ := Build(input())
		if !reflect.DeepEqual(a, b) {
			t.Fatal("the same inputs built different Jobs")
		}
	}
}

func TestBuildRefusals(t *testing.T) {
	cases := []struct {
		rule   string
		mutate func(*Input)
		want   string
	}{
		{"a template without an agent container is refused", func(in *Input) { in.Station.Spec.Template.Spec.Containers[0].Name = "main" }, `no container named "agent"`},
		{"a template without containers is refused", func(in *Input) { in.Station.Spec.Template.Spec.Containers = nil }, "containers is empty"},
		{"host networking is refused", func(in *Input) { in.Station.Spec.Template.Spec.HostNetwork = true }, "hostNetwork=true"},
		{"hostPath volumes are refused", func(in *Input) {
			in.Station.Spec.Template.Spec.Volumes = append(in.Station.Spec.Template.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, `volume "h" uses restricted volume type "hostPath"`},
		{"privileged containers are refused", func(in *Input) {
			in.Station.Spec.Template.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, `privileged (container "sidecar" must not set securityContext.privileged=true)`},
		{"an exec recipe needs tool_config.command", func(in *Input) { in.Model = "exec" }, "tool_config.command"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			in := input()
			c.mutate(&in)
			_, err := Build(in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	in := input()
	in.Station.Spec.Template.Spec.HostPID = true
	if _, err := Build(in); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("template refusals wrap ErrInvalidTemplate: %v", err)
	}
}

func TestExecAndRealtime(t *testing.T) {
	in := input()
	in.Model = "exec"
	in.Definition.Spec.ToolConfig = &apiextensionsv1.JSON{Raw: []byte(`{"command":["sh","-c","echo hi"]}`)}
	in.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	j, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	agent := agentContainer(t, j)
	spec, _ := runspec.Decode(envMap(agent)[runspec.EnvName].Value)
	if !reflect.DeepEqual(spec.Command, []string{"sh", "-c", "echo hi"}) {
		t.Errorf("exec command not frozen into the run spec: %+v", spec)
	}
	if j.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
		t.Error("a realtime pod carries the agents.re-cinq.com/execution: realtime label")
	}
	if len(agent.Ports) != 1 || agent.Ports[0].ContainerPort != 8090 || agent.Ports[0].Name != realtime.PortName {
		t.Error("a realtime agent container exposes the prompt port 8090, named realtime")
	}
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == realtime.TokenSecretName(string(in.Agent.UID)) {
			t.Errorf("the run's token Secret is mounted as volume %s: a file the CLI could read", v.Name)
		}
	}
	ref := envMap(agent)[realtime.EnvToken].ValueFrom
	if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != realtime.TokenSecretName(string(in.Agent.UID)) ||
		ref.SecretKeyRef.Key != realtime.TokenSecretKey || ref.SecretKeyRef.Optional == nil || *ref.SecretKeyRef.Optional {
		t.Errorf("%s is not the required token entry of the run's Secret: %+v", realtime.EnvToken, ref)
	}
	if _, ok := envMap(containerNamed(j, InitContainerName))[realtime.EnvToken]; ok {
		t.Error("the init step, which serves no session, gets the token")
	}
	raw, _ := json.Marshal(j)
	if token := realtime.Token([]byte(strings.Repeat("k", 32)), string(in.Agent.UID)); strings.Contains(string(raw), token) {
		t.Error("the token itself is in the Job spec")
	}
}

func TestAResumedSessionRestoresItsConversation(t *testing.T) {
	in := input()
	in.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	in.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://store"}}
	in.Agent.Spec.ResumeSession = "sess-9"
	j, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(agentContainer(t, j))
	if env["AGENT_CONVERSATION_ID"].Value != "sess-9" || env["AGENT_CONVERSATION_SOURCE"].Value != "https://store" {
		t.Errorf("the init step restores <source>/<resumeSession>: %+v %+v", env["AGENT_CONVERSATION_ID"], env["AGENT_CONVERSATION_SOURCE"])
	}
	spec, _ := runspec.Decode(env[runspec.EnvName].Value)
	if spec.ResumeSession != "sess-9" {
		t.Errorf("the run spec carries resumeSession, so no initial prompt is sent: %+v", spec)
	}
}

func TestAJobRunGetsNoToken(t *testing.T) {
	j, err := Build(input())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, realtime.TokenSecretPrefix) {
			t.Errorf("a job run mounts a realtime token: %+v", v)
		}
	}
	if _, ok := envMap(agentContainer(t, j))[realtime.EnvToken]; ok {
		t.Errorf("a job run is given a realtime token")
	}
}

func TestSafeName(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		rule string
		in   string
		want func(string) bool
	}{
		{"short names are kept", "agent-job-x", func(s string) bool { return s == "agent-job-x" }},
		{"63 characters are kept", strings.Repeat("b", 63), func(s string) bool { return len(s) == 63 && !strings.Contains(s, "-") }},
		{"long names are cut to 63 with a hash suffix", long, func(s string) bool { return len(s) == 63 && s[54] == '-' }},
		{"the hash tells apart long names with a shared prefix", long + "x", func(s string) bool { return s != SafeName(long) }},
		{"a trailing dash or dot before the suffix is trimmed", strings.Repeat("c", 53) + "--" + strings.Repeat("d", 20), func(s string) bool { return !strings.Contains(s, "---") }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := SafeName(c.in)
			if !c.want(got) || SafeName(c.in) != got {
				t.Errorf("SafeName(%q) = %q", c.in, got)
			}
		})
	}
}
