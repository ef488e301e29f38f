package rollout

import (
	"errors"
	"testing"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestPrepare(t *testing.T) {
	spec := func(query, cond string, args ...omniav1.RolloutAnalysisArg) omniav1.RolloutAnalysisSpec {
		return omniav1.RolloutAnalysisSpec{Query: query, SuccessCondition: cond, Args: args}
	}
	step := func(args ...omniav1.AnalysisArg) *omniav1.RolloutAnalysisStep {
		return &omniav1.RolloutAnalysisStep{TemplateName: "t", Args: args}
	}
	cases := []struct {
		name    string
		spec    omniav1.RolloutAnalysisSpec
		step    *omniav1.RolloutAnalysisStep
		query   string
		wantErr bool
	}{
		{"template defaults fill placeholders",
			spec(`up{job="{{args.job}}"}`, "result[0] == 1", omniav1.RolloutAnalysisArg{Name: "job", Value: sp("agent")}), step(),
			`up{job="agent"}`, false},
		{"step arguments override template defaults",
			spec(`up{job="{{ args.job }}"}`, "result[0] == 1", omniav1.RolloutAnalysisArg{Name: "job", Value: sp("agent")}), step(omniav1.AnalysisArg{Name: "job", Value: "canary"}),
			`up{job="canary"}`, false},
		{"step arguments the template does not declare may be used",
			spec(`x{a="{{args.a}}"}`, "result[0] > 0"), step(omniav1.AnalysisArg{Name: "a", Value: "1"}),
			`x{a="1"}`, false},
		{"template argument without any value is an error",
			spec(`x{a="{{args.a}}"}`, "result[0] > 0", omniav1.RolloutAnalysisArg{Name: "a"}), step(), "", true},
		{"placeholder without an argument is an error",
			spec(`x{a="{{args.b}}"}`, "result[0] > 0"), step(), "", true},
		{"malformed success condition is an error",
			spec(`x`, "result > 0"), step(), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _, err := Prepare(tc.spec, tc.step)
			if (err != nil) != tc.wantErr || q != tc.query {
				t.Fatalf("Prepare = %q, %v; want %q, error %v", q, err, tc.query, tc.wantErr)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	cases := []struct {
		name     string
		cond     string
		result   []float64
		pass     bool
		parseErr bool
		evalErr  bool
	}{
		{">= passes at the bound", "result[0] >= 0.95", []float64{0.95}, true, false, false},
		{">= fails below the bound", "result[0] >= 0.95", []float64{0.9}, false, false, false},
		{"<= passes below", "result[0]<=1e-2", []float64{0.001}, true, false, false},
		{"> is strict", "result[0] > 1", []float64{1}, false, false, false},
		{"< passes below", " result[0] < -1 ", []float64{-2}, true, false, false},
		{"== compares exactly", "result[0] == 1", []float64{1}, true, false, false},
		{"!= fails on equal", "result[0] != 1", []float64{1}, false, false, false},
		{"index reads later samples", "result[1] == 3", []float64{1, 3}, true, false, false},
		{"index past the result is an error", "result[1] == 3", []float64{1}, false, false, true},
		{"empty result is an error", "result[0] == 3", nil, false, false, true},
		{"unknown operator does not parse", "result[0] => 3", nil, false, true, false},
		{"non-number does not parse", "result[0] >= abc", nil, false, true, false},
		{"other expressions do not parse", "len(result) > 0", nil, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCondition(tc.cond)
			if (err != nil) != tc.parseErr {
				t.Fatalf("parse error %v, want %v", err, tc.parseErr)
			}
			if err != nil {
				return
			}
			ok, err := c.Eval(tc.result)
			if (err != nil) != tc.evalErr || ok != tc.pass {
				t.Fatalf("Eval = %v, %v; want %v, error %v", ok, err, tc.pass, tc.evalErr)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	cond, err := ParseCondition("result[0] >= 0.95")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		result   []float64
		queryErr error
		passed   bool
		hasErr   bool
	}{
		{"query error cannot judge", nil, errors.New("connection refused"), false, true},
		{"no sample cannot judge", nil, nil, false, true},
		{"value meeting the condition passes", []float64{0.99}, nil, true, false},
		{"value missing the condition fails", []float64{0.5}, nil, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Judge(cond, tc.result, tc.queryErr)
			if o.Passed != tc.passed || (o.Err != nil) != tc.hasErr || (!tc.hasErr && o.Detail == "") {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
}
