package api_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestAdmissionChecksNATSSinkSubjects creates AgentDefinitions with nats
// sinks: a subject must be one literal subject (the run publishes on it
// below its namespace's prefix), is required for nats and only for nats.
// The attacks are subjects with wildcards, empty tokens or spaces that
// would reach beyond the one subject the recipe names.
func TestAdmissionChecksNATSSinkSubjects(t *testing.T) {
	ns := env.Namespace(t)
	def := func(sinks ...agentsv1alpha1.OutputSink) *agentsv1alpha1.AgentDefinition {
		return &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{GenerateName: "d-", Namespace: ns},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Prompt: "p", Output: &agentsv1alpha1.OutputSpec{Sinks: sinks}}}
	}
	nats := func(subject string) agentsv1alpha1.OutputSink {
		return agentsv1alpha1.OutputSink{Type: agentsv1alpha1.SinkNATS, Subject: subject}
	}
	const field = "spec.output.sinks[0].subject"
	cases := []struct {
		rule string
		obj  *agentsv1alpha1.AgentDefinition
		// want are the substrings the refusal must hold; none: accepted.
		want []string
	}{
		{"a nats sink with dotted tokens of letters, digits, _ and - is accepted", def(nats("ci.Results_v2.build-7")), nil},
		{"a subject of 200 characters is accepted", def(nats(strings.Repeat("a", 200))), nil},
		{"a subject of 201 characters is refused", def(nats(strings.Repeat("a", 201))), []string{field, "200"}},
		{"a nats sink without subject is refused", def(nats("")), []string{field, "subject is required when type is nats"}},
		{"a subject on an http sink is refused", def(agentsv1alpha1.OutputSink{Type: agentsv1alpha1.SinkHTTP, URL: "https://h", Subject: "x"}),
			[]string{field, "subject is only for type nats"}},
		{"a subject on a stdout sink is refused", def(agentsv1alpha1.OutputSink{Type: agentsv1alpha1.SinkStdout, Subject: "x"}),
			[]string{field, "subject is only for type nats"}},
		{"a > wildcard is refused", def(nats("ci.>")), []string{field, "should match"}},
		{"a * wildcard is refused", def(nats("*.results")), []string{field, "should match"}},
		{"an empty token is refused", def(nats("ci..results")), []string{field, "should match"}},
		{"a leading dot is refused", def(nats(".team-b.orders")), []string{field, "should match"}},
		{"a trailing dot is refused", def(nats("ci.")), []string{field, "should match"}},
		{"a space is refused", def(nats("ci results")), []string{field, "should match"}},
		{"a newline is refused", def(nats("ci\nresults")), []string{field, "should match"}},
		{"the second sink's subject is named by its own index", def(nats("ok"), nats("ci.*")), []string{"spec.output.sinks[1].subject", "should match"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			checkAdmission(t, c.obj, c.want)
		})
	}
}

// TestTheCRDsSinkSubjectRuleIsTheGoOne: libs/sinks checks subjects with
// agentsv1alpha1.SinkSubjectPattern and SinkSubjectMaxLength, admission
// with the CRD's pattern and maxLength; they must be the same rule.
func TestTheCRDsSinkSubjectRuleIsTheGoOne(t *testing.T) {
	found := false
	for _, crd := range readCRDs(t) {
		if crd.Spec.Names.Kind != "AgentDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			sinks := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["output"].Properties["sinks"]
			if sinks.Items == nil || sinks.Items.Schema == nil {
				t.Fatal("AgentDefinition spec.output.sinks has no item schema")
			}
			subject := sinks.Items.Schema.Properties["subject"]
			if subject.Pattern != agentsv1alpha1.SinkSubjectPattern {
				t.Errorf("spec.output.sinks[].subject pattern %q, want %q", subject.Pattern, agentsv1alpha1.SinkSubjectPattern)
			}
			if subject.MaxLength == nil || *subject.MaxLength != agentsv1alpha1.SinkSubjectMaxLength {
				t.Errorf("spec.output.sinks[].subject maxLength %v, want %d", subject.MaxLength, agentsv1alpha1.SinkSubjectMaxLength)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no AgentDefinition CRD")
	}
}
