// Package eventsv1 holds the run-event envelope generated from
// agentplane/events/v1/events.proto, plus the NATS subject and dedupe-id
// helpers every producer and consumer of that envelope share.
package eventsv1

import (
	"strconv"
	"strings"
)

// SubjectPrefix is the first token of every run-event NATS subject.
const SubjectPrefix = "agents"

// SubjectToken returns the kind as it appears as the last token of a NATS
// subject: lowercase without the EVENT_KIND_ prefix, so EVENT_KIND_TOOL_CALL
// gives "tool_call". A value this build does not know gives its number.
func (k EventKind) SubjectToken() string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "EVENT_KIND_"))
}

// Subject returns the NATS subject the event is published on:
// agents.<namespace>.<agent>.<kind>.
//
// Namespace and agent are made safe as single subject tokens: '.', '*', '>',
// whitespace and control characters become '_', and an empty value becomes
// "_". Agent names may contain dots (they are DNS subdomains) while no
// Kubernetes name contains '_', so valid names never collide.
func (e *RunEvent) Subject() string {
	r := e.GetRun()
	return SubjectPrefix + "." + subjectToken(r.GetNamespace()) + "." +
		subjectToken(r.GetAgent()) + "." + e.GetKind().SubjectToken()
}

// DedupeID returns the id used as the Nats-Msg-Id header: the event's id when
// set, else "<run.uid>-<sequence>". It returns "" when neither is available
// (no id, and no uid or a zero sequence), meaning the event cannot be
// deduplicated. Producers set Id = DedupeID() once run and sequence are set.
func (e *RunEvent) DedupeID() string {
	if id := e.GetId(); id != "" {
		return id
	}
	uid, seq := e.GetRun().GetUid(), e.GetSequence()
	if uid == "" || seq == 0 {
		return ""
	}
	return uid + "-" + strconv.FormatUint(seq, 10)
}

// subjectToken maps s to a single valid NATS subject token. It does not
// allocate when s is already valid, which is the common case.
func subjectToken(s string) string {
	if s == "" {
		return "_"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if badSubjectByte(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if badSubjectByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

// badSubjectByte reports bytes that would split a token or act as a wildcard.
func badSubjectByte(c byte) bool {
	return c <= ' ' || c == 0x7f || c == '.' || c == '*' || c == '>'
}
