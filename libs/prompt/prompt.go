// Package prompt renders a recipe's prompt template with the Agent's
// parameters, by the placeholder rules below.
package prompt

import "strings"

// Render replaces every {name} placeholder of tmpl whose name is a key of
// params with its value.
//
// A placeholder is "{", one or more of [A-Za-z0-9_.-], then "}". The rules,
// fixed so that existing recipes always render the same:
//   - an unknown placeholder stays as written, braces included, so a typo
//     is visible in the prompt (and in the Job) rather than silently empty;
//   - "{}", an unclosed "{" and braces around other characters are text;
//   - every occurrence of a known placeholder is replaced;
//   - one pass: a value that itself looks like a placeholder is not
//     expanded again, so parameters cannot inject other parameters;
//   - there is no escaping, no conditional and no loop.
func Render(tmpl string, params map[string]string) string {
	if len(params) == 0 || !strings.Contains(tmpl, "{") {
		return tmpl
	}
	var b strings.Builder
	b.Grow(len(tmpl))
	for i := 0; i < len(tmpl); {
		open := strings.IndexByte(tmpl[i:], '{')
		if open < 0 {
			b.WriteString(tmpl[i:])
			break
		}
		open += i
		b.WriteString(tmpl[i:open])
		end := open + 1
		for end < len(tmpl) && nameByte(tmpl[end]) {
			end++
		}
		if end < len(tmpl) && tmpl[end] == '}' && end > open+1 {
			if v, ok := params[tmpl[open+1:end]]; ok {
				b.WriteString(v)
				i = end + 1
				continue
			}
		}
		// Not a known placeholder: keep the "{" and rescan after it, so
		// "{{name}" still finds "{name}".
		b.WriteByte('{')
		i = open + 1
	}
	return b.String()
}

// nameByte reports the bytes a placeholder name may contain.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-'
}
