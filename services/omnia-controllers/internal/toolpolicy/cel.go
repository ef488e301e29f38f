package toolpolicy

import (
	"fmt"
	"net/textproto"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// The variables a ToolPolicy expression sees: one governed tool call as
// the HTTP request that carries it. The tool's registry and name, the
// caller's identity and its claims travel as X-Omnia-* request headers;
// the call's arguments are the JSON body.
const (
	// VarHeaders is the request's headers, each under its canonical MIME
	// name ("X-Omnia-Tool-Name", never "x-omnia-tool-name"), one value each.
	VarHeaders = "headers"
	// VarBody is the call's arguments, the request's JSON object.
	VarBody = "body"
)

// celEnv is the one CEL environment every expression compiles in; building it
// costs far more than a compile, and it is safe for concurrent use.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(VarHeaders, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarBody, cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
	)
})

// CompileDeny compiles a rule's deny expression: it must parse, type-check
// against the call's variables and yield a bool (or dyn, which only a call
// can tell).
func CompileDeny(expr string) error { return compile(expr, cel.BoolType) }

// CompileHeader compiles a headerInjection expression: it must yield the
// header's value, a string (or dyn).
func CompileHeader(expr string) error { return compile(expr, cel.StringType) }

// compiled remembers each expression's verdict: a pass compiles every
// expression of its policy, and most passes see expressions an earlier
// pass compiled already. It holds at most maxCompiled verdicts and starts
// over when full, so edits cannot grow it without bound.
var compiled = struct {
	sync.Mutex
	m map[compileKey]error
}{m: map[compileKey]error{}}

const maxCompiled = 4096

type compileKey struct {
	expr string
	want string
}

func compile(expr string, want *cel.Type) error {
	k := compileKey{expr: expr, want: want.String()}
	compiled.Lock()
	err, ok := compiled.m[k]
	compiled.Unlock()
	if ok {
		return err
	}
	err = compileOnce(expr, want)
	compiled.Lock()
	if len(compiled.m) >= maxCompiled {
		compiled.m = map[compileKey]error{}
	}
	compiled.m[k] = err
	compiled.Unlock()
	return err
}

func compileOnce(expr string, want *cel.Type) error {
	e, err := celEnv()
	if err != nil {
		return fmt.Errorf("build the CEL environment: %w", err)
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		// The issues' text repeats the expression with a caret under the
		// fault; one line is enough for a condition message.
		return fmt.Errorf("%s", strings.Join(strings.Fields(iss.Err().Error()), " "))
	}
	if out := ast.OutputType(); !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return fmt.Errorf("yields %s, want %s", out, want)
	}
	return nil
}

// HeaderRef is a header name an expression looks up by a literal key that
// is not the key's canonical MIME form. Request headers reach the
// expression under canonical names only, so the lookup never matches.
type HeaderRef struct {
	// Raw is the key as written.
	Raw string
	// Canonical is the name the header has in headers.
	Canonical string
}

// NonCanonicalHeaderRefs lists, once each and in the order written, the
// literal header names expr reads from headers in a form other than the
// canonical one: headers["x-team"], "x-team" in headers, headers.team.
// A key computed at run time cannot be judged and is left out. An
// expression that does not parse has no references to judge.
func NonCanonicalHeaderRefs(expr string) []HeaderRef {
	e, err := celEnv()
	if err != nil {
		return nil
	}
	ast, iss := e.Parse(expr)
	if iss.Err() != nil {
		return nil
	}
	var out []HeaderRef
	seen := map[string]bool{}
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		key, ok := headerKey(x)
		if !ok || seen[key] {
			return
		}
		seen[key] = true
		if c := textproto.CanonicalMIMEHeaderKey(key); c != key {
			out = append(out, HeaderRef{Raw: key, Canonical: c})
		}
	}))
	return out
}

// headerKey is the literal header name x looks up in headers, if it is
// such a lookup.
func headerKey(x celast.Expr) (string, bool) {
	switch x.Kind() {
	case celast.SelectKind:
		s := x.AsSelect()
		return s.FieldName(), isHeaders(s.Operand())
	case celast.CallKind:
		c := x.AsCall()
		args := c.Args()
		if len(args) != 2 {
			return "", false
		}
		switch c.FunctionName() {
		case operators.Index, operators.OptIndex:
			return literal(args[1], isHeaders(args[0]))
		case operators.In:
			return literal(args[0], isHeaders(args[1]))
		}
	}
	return "", false
}

func isHeaders(x celast.Expr) bool {
	return x.Kind() == celast.IdentKind && x.AsIdent() == VarHeaders
}

func literal(x celast.Expr, ok bool) (string, bool) {
	if !ok || x.Kind() != celast.LiteralKind {
		return "", false
	}
	s, isString := x.AsLiteral().(types.String)
	return string(s), isString
}
