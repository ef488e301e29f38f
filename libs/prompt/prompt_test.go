package prompt

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// render is RenderLimit without a cap that any test reaches.
func render(t *testing.T, tmpl string, params map[string]string) string {
	t.Helper()
	out, err := RenderLimit(tmpl, params, 1<<40)
	if err != nil {
		t.Fatalf("uncapped render refused: %v", err)
	}
	return out
}

// allocatedBytes is the bytes allocated so far by the whole program.
func allocatedBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

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
			got, err := Render(tt.tmpl, params)
			if err != nil || got != tt.want {
				t.Errorf("Render(%q) = %q, %v; want %q", tt.tmpl, got, err, tt.want)
			}
		})
	}
}

func TestRenderWithoutParametersReturnsTemplate(t *testing.T) {
	if got, err := Render("hello {name}", nil); err != nil || got != "hello {name}" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestRenderCap checks where the cap falls: on the output's size, counted
// in bytes, whatever the pieces it is made of.
func TestRenderCap(t *testing.T) {
	const limit = 100
	tests := []struct {
		rule   string
		tmpl   string
		params map[string]string
		// fits is whether the output is within the cap; when it is, the
		// output must be exactly what an uncapped render gives.
		fits bool
	}{
		{"a template exactly at the cap renders", strings.Repeat("a", limit), nil, true},
		{"a template one byte over the cap fails, even without parameters", strings.Repeat("a", limit+1), nil, false},
		{"an output exactly at the cap renders", "{v}{v}", map[string]string{"v": strings.Repeat("b", limit/2)}, true},
		{"an output one byte over the cap fails", "{v}{v}!", map[string]string{"v": strings.Repeat("b", limit/2)}, false},
		{"one value over the cap fails", "{v}", map[string]string{"v": strings.Repeat("b", limit+1)}, false},
		{"a short template repeating a placeholder fails", strings.Repeat("{v}", 11), map[string]string{"v": strings.Repeat("c", 10)}, false},
		{"multibyte text counts in bytes", strings.Repeat("ü", limit/2), map[string]string{"x": "y"}, true},
		{"multibyte text one byte over fails", strings.Repeat("ü", limit/2) + "{x}", map[string]string{"x": "y"}, false},
		{"unknown placeholders count as written", strings.Repeat("{nope}", limit/6) + "1234", map[string]string{"x": "y"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			got, err := RenderLimit(tt.tmpl, tt.params, limit)
			size, serr := SizeLimit(tt.tmpl, tt.params, limit)
			if tt.fits {
				if err != nil || serr != nil {
					t.Fatalf("refused: %v / %v", err, serr)
				}
				if want := render(t, tt.tmpl, tt.params); got != want || size != len(want) {
					t.Fatalf("got %q (size %d), want %q", got, size, want)
				}
				return
			}
			var tl *TooLargeError
			if !errors.As(err, &tl) || got != "" {
				t.Fatalf("got %q, %v; want a *TooLargeError", got, err)
			}
			if tl.Limit != limit || tl.TemplateBytes != len(tt.tmpl) || tl.AtLeast <= limit || tl.AtLeast > len(render(t, tt.tmpl, tt.params)) {
				t.Fatalf("error %+v does not describe the cap and sizes", tl)
			}
			if !errors.As(serr, &tl) {
				t.Fatalf("SizeLimit did not refuse: %d, %v", size, serr)
			}
		})
	}
}

func TestTooLargeErrorNamesTheCapAndTheSizes(t *testing.T) {
	msg := (&TooLargeError{Limit: 1048576, TemplateBytes: 12000, AtLeast: 1064960}).Error()
	for _, want := range []string{"1048576-byte cap", "12000-byte template", "at least 1064960 bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}

// TestAPlaceholderBombIsRefusedWithoutAllocatingIt is the attack of a
// template made of 4,000 placeholders, each filled with a 16 KiB value:
// both within admission's limits, together about 64 MB. Rendering must
// refuse it with the typed error and allocate next to nothing on the way.
func TestAPlaceholderBombIsRefusedWithoutAllocatingIt(t *testing.T) {
	tmpl := strings.Repeat("{p}", 4000)
	params := map[string]string{"p": strings.Repeat("x", 16<<10)}
	var err error
	allocs := testing.AllocsPerRun(20, func() { _, err = Render(tmpl, params) })
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != MaxRenderedBytes {
		t.Fatalf("the bomb was not refused at the cap: %v", err)
	}
	// The error itself is the only allocation.
	if allocs > 1 {
		t.Fatalf("refusing the bomb made %v allocations per render; want at most 1", allocs)
	}
	before := allocatedBytes()
	for range 20 {
		_, _ = Render(tmpl, params)
	}
	if per := (allocatedBytes() - before) / 20; per > 1024 {
		t.Fatalf("refusing the bomb allocated %d bytes per render; want well under 1 KiB (the output would be ~64 MB)", per)
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
		if got := render(t, tmpl, nil); got != tmpl {
			t.Fatalf("no parameters changed %q to %q", tmpl, got)
		}
		params := map[string]string{key: value}
		got := render(t, tmpl, params)
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

// FuzzRenderLimit checks the cap on any template, value and cap: the
// output is the uncapped one when that fits, and otherwise a
// *TooLargeError whose sizes bracket the truth, with no output.
func FuzzRenderLimit(f *testing.F) {
	f.Add("{a}{a}{a}", "a", "VVVV", 8)
	f.Add("xx{a}", "a", "", 2)
	f.Add("{{a}}", "a", "{a}", 0)
	f.Add("ü{a}ß", "a", "ü", 5)
	f.Fuzz(func(t *testing.T, tmpl, key, value string, limit int) {
		if limit < 0 {
			limit = -(limit + 1)
		}
		params := map[string]string{key: value}
		full := render(t, tmpl, params)
		got, err := RenderLimit(tmpl, params, limit)
		size, serr := SizeLimit(tmpl, params, limit)
		if len(full) <= limit {
			if err != nil || serr != nil || got != full || size != len(full) {
				t.Fatalf("RenderLimit(%q, %d) = %q, %v (size %d, %v); want %q", tmpl, limit, got, err, size, serr, full)
			}
			return
		}
		var tl *TooLargeError
		if !errors.As(err, &tl) || got != "" || !errors.As(serr, new(*TooLargeError)) {
			t.Fatalf("RenderLimit(%q, %d) = %q, %v; want a *TooLargeError (full size %d)", tmpl, limit, got, err, len(full))
		}
		if tl.Limit != limit || tl.AtLeast <= limit || tl.AtLeast > len(full) || tl.TemplateBytes != len(tmpl) {
			t.Fatalf("error %+v does not bracket the full size %d", tl, len(full))
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
