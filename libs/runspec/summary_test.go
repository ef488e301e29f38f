package runspec

import (
	"reflect"
	"strings"
	"testing"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// everyKind is a Summary with every kind this build names, at its largest
// count: the longest message the supervisor can write.
func everyKind() Summary {
	s := Summary{NATSDropped: ^uint64(0), SinkFailed: ^uint64(0), SinkDropped: ^uint64(0), Events: map[string]uint64{}}
	for v := range eventsv1.EventKind_name {
		if k := eventsv1.EventKind(v); k != eventsv1.EventKind_EVENT_KIND_UNSPECIFIED {
			s.Events[k.SubjectToken()] = ^uint64(0)
		}
	}
	return s
}

func TestSummaryRoundTrip(t *testing.T) {
	for _, c := range []struct {
		rule string
		in   Summary
	}{
		{"a quiet run", Summary{}},
		{"a run with events and losses", Summary{Events: map[string]uint64{"message": 3, "tool_call": 2, "lifecycle": 2}, NATSDropped: 1, SinkFailed: 4, SinkDropped: 5}},
		{"every kind at its largest count fits a termination message", everyKind()},
	} {
		t.Run(c.rule, func(t *testing.T) {
			raw, err := c.in.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSummary(string(raw))
			if err != nil {
				t.Fatalf("parse %s: %v", raw, err)
			}
			want := c.in
			want.Schema = SummarySchema
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseSummaryRules(t *testing.T) {
	cases := []struct {
		rule    string
		msg     string
		wantErr string
		want    Summary
	}{
		{"an empty message is not a summary", "", "run summary", Summary{}},
		{"a log tail is not a summary", "error: the CLI crashed\nsee above", "run summary", Summary{}},
		{"an event line is not a summary", `{"kind":"lifecycle","phase":"agent","status":"failed"}`, "not a " + SummarySchema, Summary{}},
		{"another schema is not this one", `{"schema":"agentplane.run-summary/v2","events":{"message":1}}`, "not a " + SummarySchema, Summary{}},
		{"a negative count is refused", `{"schema":"` + SummarySchema + `","natsDropped":-1}`, "run summary", Summary{}},
		{"trailing data is refused", `{"schema":"` + SummarySchema + `"} {}`, "run summary", Summary{}},
		{"a message over the kubelet's limit is refused", `{"schema":"` + SummarySchema + `","x":"` + strings.Repeat("x", MaxSummaryBytes) + `"}`, "over", Summary{}},
		{"an unknown kind is left out, the rest kept", `{"schema":"` + SummarySchema + `","events":{"message":2,"no such kind":9,"unspecified":1},"sinkFailed":1}`, "",
			Summary{Schema: SummarySchema, Events: map[string]uint64{"message": 2}, SinkFailed: 1}},
		{"unknown fields of a later supervisor are ignored", `{"schema":"` + SummarySchema + `","later":true,"events":{"usage":1}}` + "\n", "",
			Summary{Schema: SummarySchema, Events: map[string]uint64{"usage": 1}}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got, err := ParseSummary(c.msg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %+v, %v; want an error naming %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSummariesAdd(t *testing.T) {
	initS := Summary{Events: map[string]uint64{"lifecycle": 3}, SinkFailed: 1}
	runS := Summary{Events: map[string]uint64{"lifecycle": 2, "message": 4}, NATSDropped: 2, SinkDropped: 1}
	want := Summary{Schema: SummarySchema, Events: map[string]uint64{"lifecycle": 5, "message": 4}, NATSDropped: 2, SinkFailed: 1, SinkDropped: 1}
	if got := initS.Add(runS); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := (Summary{}).Add(Summary{}); got.Events != nil {
		t.Fatalf("two empty summaries add to events %v", got.Events)
	}
}

// FuzzParseSummary: a termination message is written by the run pod, so
// whatever it holds, parsing never panics, and what it accepts names only
// known kinds.
func FuzzParseSummary(f *testing.F) {
	raw, err := everyKind().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(raw))
	f.Add(`{"schema":"` + SummarySchema + `","events":{"message":1,"bogus":2}}`)
	f.Add(`{"schema":"` + SummarySchema + `","events":null}`)
	f.Add(`{"schema":1}`)
	f.Add("")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, msg string) {
		s, err := ParseSummary(msg)
		if err != nil {
			return
		}
		if s.Schema != SummarySchema {
			t.Fatalf("accepted schema %q", s.Schema)
		}
		for k := range s.Events {
			if !KnownEventKind(k) {
				t.Fatalf("accepted kind %q", k)
			}
		}
	})
}
