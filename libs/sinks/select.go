package sinks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/truncate"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Selector is one entry of output.select (AGENT_SELECT): the JSON of
// v1alpha1.OutputSelector. Its set fields must all match (AND); a Select
// passes an event when any of its entries matches (OR).
type Selector struct {
	// Event is the CLI event kind: tool_call, message, tool_result, result
	// or usage.
	Event string `json:"event"`
	// Tool narrows tool_call and tool_result events to a tool name (exact).
	// A tool_result is matched by the name of the call it answers.
	Tool string `json:"tool,omitempty"`
	// Role narrows message events to a speaker (assistant, user). It is
	// matched on message events, where it has a meaning, and ignored on
	// other kinds, so a recipe that sets role on e.g. a tool_call entry
	// still selects those events.
	Role string `json:"role,omitempty"`
	// Contains requires this case-sensitive text in the event's text
	// (message text, tool result text, result text, tool call name or
	// argument strings) or in the vendor's original line.
	Contains string `json:"contains,omitempty"`
}

// Select is a parsed output.select. Empty passes everything.
type Select []Selector

// selectEvents are the kinds output.select can name.
var selectEvents = map[string]bool{
	"tool_call": true, "message": true, "tool_result": true, "result": true, "usage": true,
}

// maxSelectors bounds the work per event a hostile AGENT_SELECT can cause.
const maxSelectors = 256

// ParseSelect parses AGENT_SELECT. It fails open, so a broken filter never
// hides events: empty or malformed input, or entries that all name unknown
// events, give an empty Select (everything passes) plus an error to log.
// Entries with an unknown event are dropped, never coerced to another kind.
func ParseSelect(data []byte) (Select, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var raw []Selector
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: malformed JSON, passing every event: %w", EnvSelect, jsonError(err))
	}
	var out Select
	var errs []error
	for i, s := range raw {
		if !selectEvents[s.Event] {
			errs = append(errs, fmt.Errorf("%s[%d]: unknown event %q dropped", EnvSelect, i, truncate.String(s.Event, 32)))
			continue
		}
		if len(out) == maxSelectors {
			errs = append(errs, fmt.Errorf("%s: more than %d entries, rest ignored", EnvSelect, maxSelectors))
			break
		}
		out = append(out, s)
	}
	if len(out) == 0 && len(errs) > 0 {
		errs = append(errs, fmt.Errorf("%s: no usable entry, passing every event", EnvSelect))
	}
	return out, errors.Join(errs...)
}

// rememberedCalls bounds the tool call id → name memory used to match
// tool_result events by tool name.
const rememberedCalls = 1024

// Matcher applies a Select to a run's events. It remembers the names of
// recent tool calls so a tool_result can be matched by the tool it answers,
// which is why it must see every event (selected or not), in order. It is
// safe for concurrent use.
type Matcher struct {
	sel       []compiled
	needCalls bool

	mu    sync.Mutex
	calls map[string]string // tool call id → tool name
	ring  []string          // ids in arrival order, for eviction
	next  int
}

type compiled struct {
	Selector
	event    eventsv1.EventKind
	contains []byte
}

// NewMatcher returns a Matcher for sel.
func NewMatcher(sel Select) *Matcher {
	m := &Matcher{}
	for _, s := range sel {
		kind := eventsv1.EventKind(eventsv1.EventKind_value["EVENT_KIND_"+strings.ToUpper(s.Event)])
		m.sel = append(m.sel, compiled{Selector: s, event: kind, contains: []byte(s.Contains)})
		if s.Tool != "" && kind == eventsv1.EventKind_EVENT_KIND_TOOL_RESULT {
			m.needCalls = true
		}
	}
	if m.needCalls {
		m.calls = make(map[string]string)
		m.ring = make([]string, rememberedCalls)
	}
	return m
}

// Match reports whether ev goes to the select-gated sinks. Lifecycle, file
// and batch events always pass; with an empty Select every event passes;
// otherwise a CLI event passes when some entry matches it, and
// unclassified (raw) lines never do.
func (m *Matcher) Match(ev *eventsv1.RunEvent) bool {
	if !events.IsCLIEvent(ev) {
		return true
	}
	if m.needCalls {
		m.remember(ev)
	}
	if len(m.sel) == 0 {
		return true
	}
	kind := ev.GetKind()
	for i := range m.sel {
		s := &m.sel[i]
		if s.event != kind {
			continue
		}
		if s.Tool != "" && m.toolName(ev) != s.Tool {
			continue
		}
		if s.Role != "" && kind == eventsv1.EventKind_EVENT_KIND_MESSAGE && ev.GetMessage().GetRole() != s.Role {
			continue
		}
		if len(s.contains) > 0 && !containsText(ev, s.Contains, s.contains) {
			continue
		}
		return true
	}
	return false
}

// remember records a tool call's name under its id.
func (m *Matcher) remember(ev *eventsv1.RunEvent) {
	tc := ev.GetToolCall()
	if tc == nil || tc.GetId() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.calls[tc.GetId()]; !ok {
		if old := m.ring[m.next]; old != "" {
			delete(m.calls, old)
		}
		m.ring[m.next] = tc.GetId()
		m.next = (m.next + 1) % len(m.ring)
	}
	m.calls[tc.GetId()] = tc.GetName()
}

// toolName is the tool a tool_call names, or the one a tool_result answers.
func (m *Matcher) toolName(ev *eventsv1.RunEvent) string {
	if tc := ev.GetToolCall(); tc != nil {
		return tc.GetName()
	}
	if tr := ev.GetToolResult(); tr != nil && m.needCalls {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.calls[tr.GetToolCallId()]
	}
	return ""
}

// containsText looks for sub in the event's text, then in its raw line.
func containsText(ev *eventsv1.RunEvent, sub string, subBytes []byte) bool {
	switch p := ev.GetPayload().(type) {
	case *eventsv1.RunEvent_Message:
		if strings.Contains(p.Message.GetText(), sub) {
			return true
		}
	case *eventsv1.RunEvent_ToolResult:
		if strings.Contains(p.ToolResult.GetText(), sub) {
			return true
		}
	case *eventsv1.RunEvent_Result:
		if strings.Contains(p.Result.GetText(), sub) {
			return true
		}
	case *eventsv1.RunEvent_ToolCall:
		if strings.Contains(p.ToolCall.GetName(), sub) || structContains(p.ToolCall.GetInput(), sub, 0) {
			return true
		}
	}
	return bytes.Contains(ev.GetRaw(), subBytes)
}

// maxDepth stops the walk of deeply nested tool arguments.
const maxDepth = 32

// structContains reports whether a string value (or key) of s contains sub.
func structContains(s *structpb.Struct, sub string, depth int) bool {
	if depth > maxDepth {
		return false
	}
	for k, v := range s.GetFields() {
		if strings.Contains(k, sub) || valueContains(v, sub, depth+1) {
			return true
		}
	}
	return false
}

func valueContains(v *structpb.Value, sub string, depth int) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return strings.Contains(k.StringValue, sub)
	case *structpb.Value_StructValue:
		return structContains(k.StructValue, sub, depth)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if depth <= maxDepth && valueContains(e, sub, depth+1) {
				return true
			}
		}
	}
	return false
}
