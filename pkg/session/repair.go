package session

import (
	"fmt"

	"agent/pkg/llm"
)

// InterruptedResult is the content of the tool result Repair inserts for a
// call that never got one (the daemon stopped, the step was cancelled).
const InterruptedResult = "error: tool call was interrupted"

// Repair returns msgs made acceptable to OpenAI-compatible APIs, which reject
// (HTTP 400) a history whose tool calls and results do not pair up:
//
//   - every assistant tool call is followed, before the next non-tool
//     message, by a tool result with its id; a missing one is inserted as
//     InterruptedResult after the results that are there;
//   - a tool result whose id is not an unanswered call of the assistant
//     message just before it (orphaned, misplaced or a duplicate) is dropped;
//   - a tool call with an empty id, or an id already used in the same
//     message, is dropped from the assistant message (nothing can answer it).
//
// msgs is not modified. Repair(Repair(x)) == Repair(x), and Valid(Repair(x))
// is nil for any x.
func Repair(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	var pending []llm.ToolCall // calls of the current exchange, in order
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pending {
			if !answered[c.ID] {
				out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: InterruptedResult})
			}
		}
		pending = nil
		clear(answered)
	}
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			if isPending(pending, m.ToolCallID) && !answered[m.ToolCallID] {
				answered[m.ToolCallID] = true
				out = append(out, m)
			}
			continue
		}
		flush()
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			m.ToolCalls = cleanCalls(m.ToolCalls)
			pending = m.ToolCalls
			if len(m.ToolCalls) == 0 {
				m.ToolCalls = nil
			}
		}
		out = append(out, m)
	}
	flush()
	return out
}

func isPending(calls []llm.ToolCall, id string) bool {
	if id == "" {
		return false
	}
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// cleanCalls drops calls with empty or repeated ids, copying only if needed.
func cleanCalls(calls []llm.ToolCall) []llm.ToolCall {
	seen := make(map[string]bool, len(calls))
	ok := true
	for _, c := range calls {
		if c.ID == "" || seen[c.ID] {
			ok = false
			break
		}
		seen[c.ID] = true
	}
	if ok {
		return calls
	}
	clear(seen)
	out := make([]llm.ToolCall, 0, len(calls))
	for _, c := range calls {
		if c.ID == "" || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out
}

// Valid reports the first way msgs breaks the tool-call pairing rules that
// Repair enforces, or nil.
func Valid(msgs []llm.Message) error {
	var (
		calls    []llm.ToolCall  // calls of the current exchange
		answered map[string]bool // call id -> has a result
		lastCall = -1
	)
	check := func(at int) error {
		for _, c := range calls {
			if !answered[c.ID] {
				return fmt.Errorf("session: message %d: tool call %q of message %d has no result", at, c.ID, lastCall)
			}
		}
		return nil
	}
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			done, ok := answered[m.ToolCallID]
			switch {
			case !ok:
				return fmt.Errorf("session: message %d: tool result %q does not answer a call of the preceding assistant message", i, m.ToolCallID)
			case done:
				return fmt.Errorf("session: message %d: duplicate tool result %q", i, m.ToolCallID)
			}
			answered[m.ToolCallID] = true
			continue
		}
		if err := check(i); err != nil {
			return err
		}
		calls, answered = nil, nil
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			calls, answered, lastCall = m.ToolCalls, make(map[string]bool, len(m.ToolCalls)), i
			for _, c := range m.ToolCalls {
				if c.ID == "" {
					return fmt.Errorf("session: message %d: tool call with empty id", i)
				}
				if _, dup := answered[c.ID]; dup {
					return fmt.Errorf("session: message %d: repeated tool call id %q", i, c.ID)
				}
				answered[c.ID] = false
			}
		}
	}
	return check(len(msgs))
}
