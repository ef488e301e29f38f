package prompt

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	params := map[string]string{"repo": "acme/api", "issue": "42", "a.b-c_d": "X", "inject": "{repo}", "empty": ""}
	tests := []struct {
		name, tmpl, want string
	}{
		{"known placeholder is replaced", "fix {repo}", "fix acme/api"},
		{"every occurrence is replaced", "{issue} and {issue}", "42 and 42"},
		{"unknown placeholder stays as written", "fix {repoo} now", "fix {repoo} now"},
		{"empty braces are text", "a {} b", "a {} b"},
		{"unclosed brace is text", "a {repo", "a {repo"},
		{"braces around other characters are text", "{re po} {a/b}", "{re po} {a/b}"},
		{"name may hold dots dashes underscores digits", "{a.b-c_d}", "X"},
		{"values are not rendered again", "{inject}", "{repo}"},
		{"empty value replaces", "[{empty}]", "[]"},
		{"double brace keeps the outer one", "{{repo}}", "{acme/api}"},
		{"empty template stays empty", "", ""},
		{"JSON in a prompt is left alone", `{"key": {repo}}`, `{"key": acme/api}`},
		{"multibyte text around placeholders survives", "ü{issue}ß", "ü42ß"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.tmpl, params); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestRenderWithoutParametersReturnsTemplate(t *testing.T) {
	if got := Render("hello {name}", nil); got != "hello {name}" {
		t.Fatalf("got %q", got)
	}
}

// FuzzRender checks the renderer's invariants on any template: it never
// panics, without parameters it is the identity, an unknown key changes
// nothing, and a value without braces is inserted exactly once per token.
func FuzzRender(f *testing.F) {
	for _, s := range []string{"", "{a}", "{{a}}", "{", "}", "{}", "x{a}y{b}z", "{a.b-c}", "{ä}", "{a", "a}{a}{"} {
		f.Add(s, "a", "V")
	}
	f.Fuzz(func(t *testing.T, tmpl, key, value string) {
		if got := Render(tmpl, nil); got != tmpl {
			t.Fatalf("no parameters changed %q to %q", tmpl, got)
		}
		params := map[string]string{key: value}
		got := Render(tmpl, params)
		token := "{" + key + "}"
		if !strings.Contains(tmpl, token) || !validName(key) {
			if got != tmpl {
				t.Fatalf("template %q without token %q changed to %q", tmpl, token, got)
			}
			return
		}
		if strings.ContainsAny(value, "{}") {
			return
		}
		// With a brace-free value, the output must equal a plain
		// replacement of every token occurrence found left to right.
		if want := strings.ReplaceAll(tmpl, token, value); got != want {
			t.Fatalf("Render(%q, %q=%q) = %q, want %q", tmpl, key, value, got, want)
		}
	})
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}
