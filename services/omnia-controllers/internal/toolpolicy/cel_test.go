package toolpolicy

import (
	"fmt"
	"testing"
)

// TestNonCanonicalHeaderRefs has one case per way an expression can read a
// header by a literal name, and per lookup that cannot or need not be
// judged.
func TestNonCanonicalHeaderRefs(t *testing.T) {
	cases := []struct {
		name string
		expr string
		want string // fmt of the refs
	}{
		{"an index with a lower-case name is reported with its canonical form",
			`headers["x-omnia-claim-team"] == "a"`, `[{x-omnia-claim-team X-Omnia-Claim-Team}]`},
		{"a single-quoted name is the same lookup", `headers['content-type'] == "a"`, `[{content-type Content-Type}]`},
		{"a membership test reads the header too", `"x-user" in headers`, `[{x-user X-User}]`},
		{"a field selection reads the header too, inside has() as well", `has(headers.authorization) && headers.accept == ""`,
			`[{authorization Authorization} {accept Accept}]`},
		{"a name read twice is reported once, in the order written",
			`headers["x-b"] == "" || headers["x-a"] == "" || headers["x-b"] == "1"`, `[{x-b X-B} {x-a X-A}]`},
		{"a canonical name is fine", `headers["X-Omnia-Tool-Name"] == "x" && "X-User" in headers`, `[]`},
		{"a name computed at run time cannot be judged", `headers[body.key] == "x"`, `[]`},
		{"a lookup in another map is not a header", `body["x-user"] == "a" && "x-user" in body`, `[]`},
		{"a lookup inside a macro is found", `["a"].exists(k, headers["x-k"] == k)`, `[{x-k X-K}]`},
		{"an expression that does not parse has nothing to judge", `headers["x-a"] ==`, `[]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NonCanonicalHeaderRefs(tc.expr)
			if got == nil {
				got = []HeaderRef{} // nil and empty print alike
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("NonCanonicalHeaderRefs(%s) = %s; want %s", tc.expr, s, tc.want)
			}
		})
	}
}

// TestCompile: what a deny rule and a header expression must yield, over
// the variables a call has.
func TestCompile(t *testing.T) {
	cases := []struct {
		name   string
		header bool
		expr   string
		ok     bool
	}{
		{"a deny rule over headers and body compiles", false, `headers["X-Omnia-Tool-Name"] == "x" && body.n > 3`, true},
		{"the string extensions are there", false, `headers["X-Omnia-Claim-Team"].lowerAscii().startsWith("ops")`, true},
		{"a deny rule must yield a bool", false, `size(headers)`, false},
		{"a deny rule cannot name other variables", false, `claims.team == "ops"`, false},
		{"a header expression yields a string", true, `headers["X-Omnia-Claim-Sub"] + "@tenant"`, true},
		{"a header expression of unknown type compiles", true, `body.user`, true},
		{"a header expression must not yield a bool", true, `has(body.user)`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compile := CompileDeny
			if tc.header {
				compile = CompileHeader
			}
			if err := compile(tc.expr); (err == nil) != tc.ok {
				t.Fatalf("compile(%s) = %v; want ok %v", tc.expr, err, tc.ok)
			}
		})
	}
}
