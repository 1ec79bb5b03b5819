package assistant

import (
	"context"
	"slices"
	"strings"

	"agent/pkg/agent"
	"agent/pkg/conversation"
	"agent/pkg/redact"
)

// restoresValues says which tools get the real values back in their
// arguments when [privacy] redact is on: the built-in ones that deliver
// to people or keep for later what the user asked for (message, the
// send_* tools, schedule, write_file). Every other tool (exec, web_*,
// read_document, custom and MCP tools) runs with the placeholders: what
// it would do with a value it could hand back to the model. A custom or
// MCP tool may not take a built-in name, so a name alone cannot claim
// the values.
func restoresValues(tool string) bool {
	if !slices.Contains(builtinTools, tool) {
		return false
	}
	return tool == "message" || tool == "schedule" || tool == "write_file" || strings.HasPrefix(tool, "send_")
}

// redactScoped names each turn's conversation (its routing key) to the
// redaction client, which keeps one placeholder map per conversation.
type redactScoped struct{ next conversation.Turner }

func (r redactScoped) Turn(ctx context.Context, in agent.Input, emit func(agent.Event)) (agent.Output, error) {
	return r.next.Turn(redact.WithConversation(ctx, string(in.Key)), in, emit)
}
