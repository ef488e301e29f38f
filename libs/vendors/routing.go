package vendors

import "strings"

var (
	claudeVendor   = claude{}
	codexVendor    = codex{}
	geminiVendor   = gemini{}
	openCodeVendor = openCode{}
	execVendor     = execV{}
)

// Route picks the vendor that runs model. The rules, on the lowercased model:
// exactly "exec" is exec; containing "opencode" is OpenCode (so
// "opencode/google/gemini-2.5-pro" runs OpenCode, not Gemini); containing
// "gemini" is Gemini; containing "codex", starting with "gpt", "o1", "o3",
// "o4" or "openai/" is Codex; anything else, the empty model included, is
// Claude.
func Route(model string) Vendor {
	m := strings.ToLower(strings.TrimSpace(model))
	switch {
	case m == NameExec:
		return execVendor
	case strings.Contains(m, "opencode"):
		return openCodeVendor
	case strings.Contains(m, "gemini"):
		return geminiVendor
	case strings.Contains(m, "codex"), strings.HasPrefix(m, "openai/"),
		strings.HasPrefix(m, "gpt"), strings.HasPrefix(m, "o1"),
		strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"):
		return codexVendor
	default:
		return claudeVendor
	}
}

// ByName returns the vendor called name (NameClaude, ...).
func ByName(name string) (Vendor, bool) {
	for _, v := range All() {
		if v.Name() == name {
			return v, true
		}
	}
	return nil, false
}

// All returns every vendor, in a fixed order.
func All() []Vendor {
	return []Vendor{claudeVendor, codexVendor, geminiVendor, openCodeVendor, execVendor}
}

// stripPrefix removes a routing prefix such as "openai/" that the CLI
// itself would not understand, case-insensitively.
func stripPrefix(model, prefix string) string {
	if len(model) >= len(prefix) && strings.EqualFold(model[:len(prefix)], prefix) {
		return model[len(prefix):]
	}
	return model
}
