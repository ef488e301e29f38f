package rollout

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// MergeArgs combines a RolloutAnalysis's arguments with a step's: the
// step's value wins, and every template argument must end with a value.
// Step arguments the template does not declare are kept; the query may
// still use them.
func MergeArgs(template []omniav1.RolloutAnalysisArg, step []omniav1.AnalysisArg) (map[string]string, error) {
	args := make(map[string]string, len(template)+len(step))
	for _, a := range step {
		args[a.Name] = a.Value
	}
	var missing []string
	for _, a := range template {
		if _, ok := args[a.Name]; ok {
			continue
		}
		if a.Value == nil {
			missing = append(missing, a.Name)
			continue
		}
		args[a.Name] = *a.Value
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("argument(s) %s have no value", strings.Join(missing, ", "))
	}
	return args, nil
}

var placeholder = regexp.MustCompile(`\{\{\s*args\.([A-Za-z0-9_-]+)\s*\}\}`)

// RenderQuery replaces every {{args.<name>}} in a PromQL query. A
// placeholder without an argument is an error: sending it to Prometheus
// would fail less clearly, or worse, match something unintended.
func RenderQuery(query string, args map[string]string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(query, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := args[name]
		if !ok {
			unknown = append(unknown, name)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("query uses undefined argument(s) %s", strings.Join(unknown, ", "))
	}
	return out, nil
}

// Condition is a parsed successCondition: result[Index] Op Value.
type Condition struct {
	// Index is the position in the query's result.
	Index int
	// Op is one of >=, <=, >, <, == and !=.
	Op string
	// Value is the number compared against.
	Value float64
}

var conditionRE = regexp.MustCompile(`^\s*result\[([0-9]+)\]\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$`)

// ParseCondition parses "result[<index>] <op> <number>".
func ParseCondition(s string) (Condition, error) {
	m := conditionRE.FindStringSubmatch(s)
	if m == nil {
		return Condition{}, fmt.Errorf("successCondition %q is not of the form result[<index>] <op> <number>", s)
	}
	idx, err := strconv.Atoi(m[1])
	if err != nil {
		return Condition{}, fmt.Errorf("successCondition %q: index: %w", s, err)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return Condition{}, fmt.Errorf("successCondition %q: %q is not a number", s, m[3])
	}
	return Condition{Index: idx, Op: m[2], Value: v}, nil
}

// Eval applies the condition to a query result. A result too short for
// the index is an error, not a failure: no data says nothing about the
// candidate.
func (c Condition) Eval(result []float64) (bool, error) {
	if c.Index >= len(result) {
		return false, fmt.Errorf("the query returned %d value(s); the condition reads result[%d]", len(result), c.Index)
	}
	x := result[c.Index]
	switch c.Op {
	case ">=":
		return x >= c.Value, nil
	case "<=":
		return x <= c.Value, nil
	case ">":
		return x > c.Value, nil
	case "<":
		return x < c.Value, nil
	case "==":
		return x == c.Value, nil
	case "!=":
		return x != c.Value, nil
	}
	return false, fmt.Errorf("unknown operator %q", c.Op)
}

// String prints the condition as written.
func (c Condition) String() string {
	return fmt.Sprintf("result[%d] %s %s", c.Index, c.Op, strconv.FormatFloat(c.Value, 'g', -1, 64))
}

// Prepare turns a RolloutAnalysis and the step that runs it into the query
// to send and the condition to apply.
func Prepare(spec omniav1.RolloutAnalysisSpec, step *omniav1.RolloutAnalysisStep) (string, Condition, error) {
	cond, err := ParseCondition(spec.SuccessCondition)
	if err != nil {
		return "", Condition{}, err
	}
	args, err := MergeArgs(spec.Args, step.Args)
	if err != nil {
		return "", Condition{}, err
	}
	q, err := RenderQuery(spec.Query, args)
	if err != nil {
		return "", Condition{}, err
	}
	return q, cond, nil
}

// Judge turns a query's result into an analysis outcome.
func Judge(cond Condition, result []float64, queryErr error) AnalysisOutcome {
	if queryErr != nil {
		return AnalysisOutcome{Err: queryErr}
	}
	ok, err := cond.Eval(result)
	if err != nil {
		return AnalysisOutcome{Err: err}
	}
	detail := fmt.Sprintf("%s with result[%d] = %s", cond, cond.Index, strconv.FormatFloat(result[cond.Index], 'g', -1, 64))
	return AnalysisOutcome{Passed: ok, Detail: detail}
}
