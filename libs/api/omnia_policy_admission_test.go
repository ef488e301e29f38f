package api_test

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestOmniaPolicyAdmissionRules creates MemoryPolicies,
// SessionRetentionPolicies and ScheduledFunctions that each break one
// admission rule, and the valid shapes beside them. A refusal must name the
// field. What admission cannot judge — a cron expression's values, a time
// zone's existence, a regular expression's syntax — the controllers check
// and report on conditions.
func TestOmniaPolicyAdmissionRules(t *testing.T) {
	ns := env.Namespace(t)
	d := func(s string) metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.Duration{Duration: v}
	}
	retention := func(session string, transcript *string) client.Object {
		p := &omniav1alpha1.SessionRetentionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "srp-", Namespace: ns},
			Spec: omniav1alpha1.SessionRetentionPolicySpec{SessionTTL: d(session)}}
		if transcript != nil {
			v := d(*transcript)
			p.Spec.TranscriptTTL = &v
		}
		return p
	}
	memory := func(mutate func(*omniav1alpha1.MemoryPolicySpec)) client.Object {
		p := &omniav1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "mp-", Namespace: ns}}
		mutate(&p.Spec)
		return p
	}
	limit := func(n int32) client.Object {
		return memory(func(s *omniav1alpha1.MemoryPolicySpec) { s.Retrieval = &omniav1alpha1.MemoryPolicyRetrieval{Limit: n} })
	}
	redact := func(r ...omniav1alpha1.RedactionRule) client.Object {
		return memory(func(s *omniav1alpha1.MemoryPolicySpec) { s.Redact = r })
	}
	fn := func(mutate func(*omniav1alpha1.ScheduledFunctionSpec)) client.Object {
		f := &omniav1alpha1.ScheduledFunction{ObjectMeta: metav1.ObjectMeta{GenerateName: "sf-", Namespace: ns},
			Spec: omniav1alpha1.ScheduledFunctionSpec{Schedule: "*/5 * * * *", AgentRuntimeRef: omniav1alpha1.LocalObjectReference{Name: "report"}}}
		mutate(&f.Spec)
		return f
	}
	schedule := func(s string) client.Object {
		return fn(func(f *omniav1alpha1.ScheduledFunctionSpec) { f.Schedule = s })
	}
	hour, day := "1h", "24h"

	cases := []struct {
		rule string
		obj  client.Object
		// want are the substrings the refusal must hold; none: accepted.
		want []string
	}{
		// A transcript cannot outlive the session it belongs to.
		{"session retention: transcriptTTL longer than sessionTTL is refused",
			retention("1h", &day), []string{"spec.transcriptTTL", "transcriptTTL must not be longer than sessionTTL"}},
		{"session retention: transcriptTTL equal to sessionTTL is accepted", retention("1h", &hour), nil},
		{"session retention: transcriptTTL shorter than sessionTTL is accepted", retention("24h", &hour), nil},
		{"session retention: a sessionTTL under a minute is refused",
			retention("30s", nil), []string{"spec.sessionTTL", "sessionTTL must be at least 1m"}},

		// Retrieval is bounded and a redaction rule is one thing.
		{"memory: a retrieval limit of 51 is refused", limit(51), []string{"spec.retrieval.limit", "50"}},
		{"memory: a retrieval limit of 50 is accepted", limit(50), nil},
		{"memory: a redaction rule with both category and pattern is refused",
			redact(omniav1alpha1.RedactionRule{Category: omniav1alpha1.PIIEmail, Pattern: "x"}),
			[]string{"spec.redact[0]", "redact: set exactly one of category and pattern"}},
		{"memory: a redaction rule with neither is refused",
			redact(omniav1alpha1.RedactionRule{}), []string{"spec.redact[0]", "set exactly one of category and pattern"}},
		{"memory: an unknown PII category is refused",
			redact(omniav1alpha1.RedactionRule{Category: "passport"}), []string{"spec.redact[0].category", "Unsupported value"}},
		{"memory: a category and a pattern in two rules are accepted",
			redact(omniav1alpha1.RedactionRule{Category: omniav1alpha1.PIIEmail}, omniav1alpha1.RedactionRule{Pattern: `ACC-[0-9]{8}`}), nil},
		{"memory: a retention ttl under a minute is refused",
			memory(func(s *omniav1alpha1.MemoryPolicySpec) { s.Retention = &omniav1alpha1.MemoryRetention{TTL: d("10s")} }),
			[]string{"spec.retention.ttl", "retention.ttl must be at least 1m"}},

		// A schedule has five fields of cron characters.
		{"scheduled function: a schedule of four fields is refused", schedule("*/10 * * *"), []string{"spec.schedule", "should match"}},
		{"scheduled function: a schedule of six fields is refused", schedule("0 * * * * *"), []string{"spec.schedule", "should match"}},
		{"scheduled function: a CRON_TZ prefix is refused (spec.timeZone says it)", schedule("CRON_TZ=UTC 0 * * * *"), []string{"spec.schedule"}},
		{"scheduled function: a descriptor such as @hourly is refused", schedule("@hourly"), []string{"spec.schedule"}},
		{"scheduled function: a five-field schedule with names is accepted", schedule("0 9 * * MON-FRI"), nil},
		{"scheduled function: a time zone with a space is refused",
			fn(func(f *omniav1alpha1.ScheduledFunctionSpec) { f.TimeZone = "Europe/New York" }), []string{"spec.timeZone", "should match"}},
		{"scheduled function: a timeout over 120 s is refused",
			fn(func(f *omniav1alpha1.ScheduledFunctionSpec) { f.TimeoutSeconds = 121 }), []string{"spec.timeoutSeconds", "120"}},
		{"scheduled function: a history limit over 20 is refused",
			fn(func(f *omniav1alpha1.ScheduledFunctionSpec) { n := int32(21); f.HistoryLimit = &n }), []string{"spec.historyLimit", "20"}},
		{"scheduled function: an input that is not an object is refused",
			fn(func(f *omniav1alpha1.ScheduledFunctionSpec) { f.Input = &apiextensionsv1.JSON{Raw: []byte(`[1,2]`)} }), []string{"spec.input", "object"}},
		{"scheduled function: an object input, a time zone and a deadline are accepted",
			fn(func(f *omniav1alpha1.ScheduledFunctionSpec) {
				f.Input = &apiextensionsv1.JSON{Raw: []byte(`{"report":"daily"}`)}
				f.TimeZone = "Europe/Berlin"
				sec := int64(120)
				f.StartingDeadlineSeconds = &sec
			}), nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			checkAdmission(t, c.obj, c.want)
		})
	}
}
