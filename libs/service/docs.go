package service

import (
	"fmt"
	"strings"
)

// Markdown renders the flag table of a service for docs/: one row per flag
// with its variable, default and meaning. Tests compare it with the table
// committed in docs/ (see servicetest.CheckDocTable), so the docs cannot
// drift from the binary.
func (f *FlagSet) Markdown() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, fl := range f.flags {
		def := fl.Default
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s |\n", fl.Name, fl.Env, def, escapePipes(fl.Usage))
	}
	b.WriteString("| `--version` | | | print version information and exit |\n")
	return b.String()
}

func escapePipes(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
