package initstep

import "testing"

func TestMemberPath(t *testing.T) {
	tests := []struct {
		name, member, prefix, want string
		ok                         bool
	}{
		{name: "a member below the prefix is kept", member: ".claude/projects/a/s.jsonl", prefix: ".claude/projects", want: ".claude/projects/a/s.jsonl", ok: true},
		{name: "a leading dot-slash is cleaned", member: "./.claude/projects/x", prefix: ".claude/projects", want: ".claude/projects/x", ok: true},
		{name: "a parent of the prefix is skipped, not refused", member: ".claude/", prefix: ".claude/projects", want: "", ok: true},
		{name: "the archive root is skipped", member: "./", prefix: ".claude/projects", want: "", ok: true},
		{name: "a sibling of the prefix is refused", member: ".claude/settings.json", prefix: ".claude/projects", ok: false},
		{name: "a name sharing the prefix's start is refused", member: ".claude/projects-evil/x", prefix: ".claude/projects", ok: false},
		{name: "dot-dot leaving the root is refused", member: "../x", prefix: "", ok: false},
		{name: "dot-dot through the prefix is refused", member: ".claude/projects/../../x", prefix: ".claude/projects", ok: false},
		{name: "an absolute member is refused", member: "/etc/passwd", prefix: "", ok: false},
		{name: "without a prefix any inner member is kept", member: "skill/SKILL.md", prefix: "", want: "skill/SKILL.md", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := memberPath(tt.member, tt.prefix)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("memberPath(%q, %q) = %q, %v; want %q, %v", tt.member, tt.prefix, got, ok, tt.want, tt.ok)
			}
		})
	}
}
