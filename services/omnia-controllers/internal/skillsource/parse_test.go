package skillsource

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

const refundsDoc = `---
name: refunds
description: Handle refund requests within policy.
allowed-tools:
  - lookup_order
  - issue_refund
license: MIT
---
# Refunds

Check the order first.
`

// TestParseDocument has one case per frontmatter rule.
func TestParseDocument(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		want    Frontmatter
		wantErr string
	}{
		{name: "name, description and allowed-tools are read; unknown fields are allowed",
			doc:  refundsDoc,
			want: Frontmatter{Name: "refunds", Description: "Handle refund requests within policy.", AllowedTools: []string{"lookup_order", "issue_refund"}}},
		{name: "allowed-tools is optional",
			doc:  "---\nname: triage\ndescription: Sort tickets.\n---\nbody",
			want: Frontmatter{Name: "triage", Description: "Sort tickets."}},
		{name: "CRLF line endings and a byte order mark are accepted",
			doc:  "\ufeff---\r\nname: triage\r\ndescription: Sort tickets.\r\n---\r\nbody",
			want: Frontmatter{Name: "triage", Description: "Sort tickets."}},
		{name: "a document ending right after the closing line is complete",
			doc:  "---\nname: triage\ndescription: Sort tickets.\n---",
			want: Frontmatter{Name: "triage", Description: "Sort tickets."}},
		{name: "no opening line", doc: "name: x\n---\n", wantErr: `does not start with a "---" frontmatter line`},
		{name: "empty document", doc: "", wantErr: `does not start with a "---" frontmatter line`},
		{name: "no closing line", doc: "---\nname: x\ndescription: y\n", wantErr: `not closed by a "---" line`},
		{name: "broken YAML carries the parser's words", doc: "---\nname: [x\n---\n", wantErr: "frontmatter is not valid YAML: "},
		{name: "frontmatter that is a list", doc: "---\n- a\n- b\n---\n", wantErr: "frontmatter must be a YAML mapping, not a array"},
		{name: "empty frontmatter has no name", doc: "---\n---\n", wantErr: "frontmatter has no name"},
		{name: "a YAML scalar for a text field is read as text",
			doc:  "---\nname: 42\ndescription: true\n---\n",
			want: Frontmatter{Name: "42", Description: "true"}},
		{name: "a mapping for a text field", doc: "---\nname: {a: 1}\ndescription: y\n---\n", wantErr: "frontmatter name must be a string, not a object"},
		{name: "name with capitals", doc: "---\nname: Refunds\ndescription: y\n---\n", wantErr: `name "Refunds" must be lowercase`},
		{name: "name with a double hyphen", doc: "---\nname: a--b\ndescription: y\n---\n", wantErr: `name "a--b" must be lowercase`},
		{name: "name too long", doc: "---\nname: " + strings.Repeat("a", 65) + "\ndescription: y\n---\n", wantErr: "name is 65 characters, more than 64"},
		{name: "no description", doc: "---\nname: x\n---\n", wantErr: `skill "x" has no description`},
		{name: "description too long", doc: "---\nname: x\ndescription: " + strings.Repeat("d", 1025) + "\n---\n", wantErr: "description is 1025 bytes"},
		{name: "allowed-tools as a string", doc: "---\nname: x\ndescription: y\nallowed-tools: a b\n---\n", wantErr: "allowed-tools must be a list of tool names (strings); found a string"},
		{name: "allowed-tools entry that is a mapping", doc: "---\nname: x\ndescription: y\nallowed-tools:\n  - {a: 1}\n---\n", wantErr: "allowed-tools must be a list of tool names (strings); found a object"},
		{name: "empty allowed-tools entry", doc: "---\nname: x\ndescription: y\nallowed-tools: ['']\n---\n", wantErr: `allowed-tools entry "" is empty`},
		{name: "duplicate allowed tool", doc: "---\nname: x\ndescription: y\nallowed-tools: [a, a]\n---\n", wantErr: `allowed-tools lists "a" twice`},
		{name: "oversized frontmatter", doc: "---\nname: x\ndescription: y\n# " + strings.Repeat("p", maxFrontmatterBytes) + "\n---\n", wantErr: "more than the 65536 allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDocument(tc.doc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseContent has one case per content rule of a SkillSource's
// ConfigMap.
func TestParseContent(t *testing.T) {
	triage := "---\nname: triage\ndescription: Sort tickets.\n---\n"
	cases := []struct {
		name       string
		data       map[string]string
		wantSkills []omniav1.SkillSourceSkill
		wantReason string
		wantMsg    string
	}{
		{name: "every <dir>.SKILL.md key is a skill, sorted by name; other keys are ignored",
			data: map[string]string{"support.SKILL.md": refundsDoc, "SKILL.md": triage, "README.md": "not a skill", "refunds.notes.txt": "x"},
			wantSkills: []omniav1.SkillSourceSkill{
				{Name: "refunds", Description: "Handle refund requests within policy.", AllowedTools: []string{"lookup_order", "issue_refund"}, Key: "support.SKILL.md"},
				{Name: "triage", Description: "Sort tickets.", Key: "SKILL.md"},
			}},
		{name: "no skill document key", data: map[string]string{"README.md": "x"},
			wantReason: omniav1.ReasonNoSkillDocuments, wantMsg: "no skill document"},
		{name: "every invalid document is reported with its key and the parser's message",
			data:       map[string]string{"a.SKILL.md": "no frontmatter", "b.SKILL.md": triage, "c.SKILL.md": "---\nname: C\ndescription: y\n---\n"},
			wantReason: omniav1.ReasonInvalidSkillDocument,
			wantMsg:    `key "a.SKILL.md": does not start with a "---" frontmatter line; key "c.SKILL.md": name "C" must be lowercase`},
		{name: "two documents declaring one name",
			data:       map[string]string{"a.SKILL.md": triage, "b.SKILL.md": triage},
			wantReason: omniav1.ReasonDuplicateSkillName, wantMsg: `skill "triage" is declared by keys "a.SKILL.md" and "b.SKILL.md"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseContent(tc.data)
			if tc.wantReason != "" {
				var ce *ContentError
				if !errors.As(err, &ce) || ce.Reason != tc.wantReason || !strings.Contains(ce.Message, tc.wantMsg) {
					t.Fatalf("error = %#v, want reason %s with %q", err, tc.wantReason, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Skills, tc.wantSkills) {
				t.Fatalf("skills = %+v, want %+v", c.Skills, tc.wantSkills)
			}
			if !strings.HasPrefix(c.Checksum, "sha256:") || len(c.Checksum) != len("sha256:")+64 {
				t.Fatalf("checksum = %q", c.Checksum)
			}
		})
	}
}

// TestChecksumFollowsSkillDocumentsOnly: the checksum changes with a skill
// document's key or content and ignores keys that are not skills.
func TestChecksumFollowsSkillDocumentsOnly(t *testing.T) {
	base := map[string]string{"a.SKILL.md": refundsDoc}
	sum := func(data map[string]string) string {
		t.Helper()
		c, err := ParseContent(data)
		if err != nil {
			t.Fatal(err)
		}
		return c.Checksum
	}
	ref := sum(base)
	if got := sum(map[string]string{"a.SKILL.md": refundsDoc, "notes.txt": "x"}); got != ref {
		t.Errorf("a non-skill key changed the checksum")
	}
	if got := sum(map[string]string{"b.SKILL.md": refundsDoc}); got == ref {
		t.Errorf("renaming the key kept the checksum")
	}
	if got := sum(map[string]string{"a.SKILL.md": refundsDoc + "more body\n"}); got == ref {
		t.Errorf("editing the body kept the checksum")
	}
}

// FuzzParseDocument: the parser never panics, and whatever it accepts
// satisfies the rules the status relies on.
func FuzzParseDocument(f *testing.F) {
	for _, seed := range []string{refundsDoc, "", "---", "---\n---", "---\nname: a\ndescription: b\n---",
		"---\n&a [*a]\n---\n", "---\nname: !!binary aGk=\n---\n", "---\r\n- x\r\n---\r\n", "---\nallowed-tools: {a: 1}\n---"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		fm, err := ParseDocument(doc)
		if err != nil {
			if fm.Name != "" || fm.AllowedTools != nil {
				t.Fatalf("a rejected document returned data: %+v", fm)
			}
			return
		}
		if !namePattern.MatchString(fm.Name) || len(fm.Name) > maxNameLen || strings.TrimSpace(fm.Description) == "" {
			t.Fatalf("accepted frontmatter breaks the rules: %+v", fm)
		}
		seen := map[string]bool{}
		for _, tool := range fm.AllowedTools {
			if tool == "" || seen[tool] {
				t.Fatalf("accepted allowed-tools %q", fm.AllowedTools)
			}
			seen[tool] = true
		}
	})
}
