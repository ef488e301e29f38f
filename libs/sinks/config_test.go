package sinks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func TestParseSinks(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{"empty input means no sinks", "", nil, false},
		{"malformed JSON means no sinks", `[{"type":`, nil, true},
		{"entries without type are skipped", `[{"url":"http://x"},{"type":"stdout"}]`, []string{"stdout"}, true},
		{"unknown types are skipped", `[{"type":"ftp"},{"type":"file","path":"/tmp/e"}]`, []string{"file"}, true},
		{"http needs an http url", `[{"type":"http","url":"file:///etc/passwd"}]`, nil, true},
		{"file needs a path", `[{"type":"file"}]`, nil, true},
		{"every kind", `[{"type":"stdout"},{"type":"http","url":"https://h/x","headers_secret":"k"},{"type":"file","path":"/p"},{"type":"nats"},{"type":"nats","subject":"ci.results"}]`,
			[]string{"stdout", "http", "file", "nats", "nats"}, false},
		{"a nats subject with a wildcard is skipped, the rest kept", `[{"type":"nats","subject":"ci.>"},{"type":"stdout"}]`, []string{"stdout"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSinks([]byte(tt.in))
			var types []string
			for _, c := range got {
				types = append(types, c.Type)
			}
			if strings.Join(types, ",") != strings.Join(tt.want, ",") || (err != nil) != tt.wantErr {
				t.Fatalf("got %v, %v", types, err)
			}
		})
	}
}

func TestParseSinksErrorsNeverQuoteURLs(t *testing.T) {
	_, err := ParseSinks([]byte(`[{"type":"http","url":"ftp://user:hunter2@host/"}]`))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
	_, err = ParseSinks([]byte(`[{"type":"http","url":"hunter2`))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
}

// TestNATSSinkSubjects checks the subject rule of a recipe's nats sink,
// which is what keeps the run on one literal subject below its
// namespace's prefix: each escape attempt is refused at parse time.
func TestNATSSinkSubjects(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		wantErr bool
	}{
		{"no subject is the platform stream", "", false},
		{"one token is accepted", "results", false},
		{"dotted tokens of letters, digits, _ and - are accepted", "ci.Results_v2.build-7", false},
		{"a subject of 200 characters is accepted", strings.Repeat("a", 200), false},
		{"a subject over 200 characters is refused", strings.Repeat("a", 201), true},
		{"a * wildcard is refused", "ci.*", true},
		{"a > wildcard is refused", "ci.>", true},
		{"a lone > is refused", ">", true},
		{"an empty token (..) is refused", "ci..results", true},
		{"a leading dot is refused", ".team-b.x", true},
		{"a trailing dot is refused", "ci.", true},
		{"a space is refused", "ci results", true},
		{"a tab is refused", "ci\tresults", true},
		{"a newline is refused", "ci\nPUB agentplane.sinks.team-b.x", true},
		{"a non-ASCII letter is refused", "résultats", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal([]Config{{Type: TypeNATS, Subject: tt.subject}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSinks(raw)
			if (err != nil) != tt.wantErr || (len(got) == 0) != tt.wantErr {
				t.Fatalf("got %+v, %v", got, err)
			}
			if err != nil && len(tt.subject) > 32 && strings.Contains(err.Error(), tt.subject) {
				t.Fatalf("the error quotes the whole subject: %v", err)
			}
		})
	}
}

// The controller writes AGENT_SINKS from the API type; its JSON must parse.
func TestParseSinksReadsTheAPIType(t *testing.T) {
	in := []v1alpha1.OutputSink{{Type: v1alpha1.SinkHTTP, URL: "https://hooks/x", HeadersSecret: "hook-auth"}, {Type: v1alpha1.SinkFile, Path: "/workspace/e.jsonl"},
		{Type: v1alpha1.SinkNATS, Subject: "ci.results"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSinks(b)
	if err != nil || len(got) != 3 || got[0].HeadersSecret != "hook-auth" || got[1].Path != "/workspace/e.jsonl" ||
		got[2].Type != TypeNATS || got[2].Subject != "ci.results" {
		t.Fatalf("got %+v, %v", got, err)
	}
	sel, err := json.Marshal([]v1alpha1.OutputSelector{{Event: v1alpha1.SelectToolCall, Tool: "Bash", Role: v1alpha1.RoleAssistant, Contains: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ParseSelect(sel); err != nil || len(s) != 1 || s[0].Tool != "Bash" || s[0].Role != "assistant" {
		t.Fatalf("got %+v, %v", s, err)
	}
}

func FuzzParseSinks(f *testing.F) {
	for _, s := range []string{"", "null", "[]", `[{"type":"stdout"}]`, `[{"type":"http","url":"http://h"}]`,
		`[{"type":"file","path":"/p"}]`, `[{"type":"nats","subject":"a.b"}]`, `[{"type":"nats","subject":"a.>"}]`,
		`[{"type":1}]`, `{}`, "[{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, _ := ParseSinks(data)
		if len(cfgs) > maxSinks {
			t.Fatalf("%d sinks", len(cfgs))
		}
		for _, c := range cfgs {
			if err := c.validate(); err != nil {
				t.Fatalf("invalid sink returned: %v", err)
			}
		}
	})
}

func TestParseHeaderLines(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"one Name: value line", "Authorization: Bearer abc", map[string]string{"Authorization": "Bearer abc"}, false},
		{"several lines, blank lines dropped, CRLF accepted", "\nA: 1\r\n\n  \nB: two words\n", map[string]string{"A": "1", "B": "two words"}, false},
		{"a value may contain colons", "X-Url: http://h:1/p", map[string]string{"X-Url": "http://h:1/p"}, false},
		{"a line without colon is skipped", "Bearer abc\nA: 1", map[string]string{"A": "1"}, true},
		{"reserved headers cannot be overridden", "Content-Type: text/plain\nHost: evil", map[string]string{}, true},
		{"invalid names are skipped", "Bad Name: 1", map[string]string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeaderLines(tt.in)
			if (err != nil) != tt.wantErr || len(h) != len(tt.want) {
				t.Fatalf("got %v, %v", h, err)
			}
			for k, v := range tt.want {
				if h.Get(k) != v {
					t.Fatalf("%s = %q want %q", k, h.Get(k), v)
				}
			}
			if err != nil && (strings.Contains(err.Error(), "abc") || strings.Contains(err.Error(), "evil")) {
				t.Fatalf("error leaks a value: %v", err)
			}
		})
	}
}

func TestRetryPolicy(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name string
		env  map[string]string
		want RetryPolicy
	}{
		{"defaults are 3 attempts from 200ms capped at 5s", nil, DefaultRetryPolicy},
		{"garbage keeps the default", map[string]string{EnvRetryAttempts: "x", EnvRetryBaseMS: "1e3"}, DefaultRetryPolicy},
		{"attempts are at least one", map[string]string{EnvRetryAttempts: "0"}, RetryPolicy{1, 200 * time.Millisecond, 5 * time.Second}},
		{"negative delays clamp to zero", map[string]string{EnvRetryBaseMS: "-5", EnvRetryMaxMS: "-1"}, RetryPolicy{3, 0, 0}},
		{"huge values do not overflow", map[string]string{EnvRetryAttempts: "1000000", EnvRetryMaxMS: "99999999999999"}, RetryPolicy{1000000, 200 * time.Millisecond, 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryPolicyFromEnv(env(tt.env)); got != tt.want {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

// TestRetryBackoffGrowsToItsCap steps through whole schedules: doubling
// from Base, held at Max, and no wait when either is zero.
func TestRetryBackoffGrowsToItsCap(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		p    RetryPolicy
		want []time.Duration // the waits after failed attempts 1, 2, ...; the last repeats
	}{
		{"the default doubles from 200ms up to 5s", DefaultRetryPolicy, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms}},
		{"a base at the cap stays there", RetryPolicy{Attempts: 3, Base: 5 * ms, Max: 5 * ms}, []time.Duration{5 * ms}},
		{"a base over the cap is capped from the first wait", RetryPolicy{Attempts: 3, Base: time.Second, Max: 300 * ms}, []time.Duration{300 * ms}},
		{"a zero base waits nothing", RetryPolicy{Attempts: 3, Base: 0, Max: time.Second}, []time.Duration{0}},
		{"a zero cap waits nothing", RetryPolicy{Attempts: 3, Base: time.Second, Max: 0}, []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.p.Backoff()
			for n := 1; n <= 1000; n++ {
				want := tt.want[min(n, len(tt.want))-1]
				if got := b.Step(); got != want {
					t.Fatalf("wait after attempt %d = %v, want %v", n, got, want)
				}
			}
		})
	}
}
