package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolError is a tool result the server flagged with isError. Its text is
// what the model sees.
type ToolError struct {
	Server, Tool string
	Text         string
}

func (e *ToolError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("tool %s on MCP server %s failed without a message", e.Tool, e.Server)
	}
	return e.Text
}

// formatResult renders a tools/call result as text for the model: text
// content joined by newlines, other content as short notes, structured
// content as JSON (unless a text block already holds the same JSON), the
// whole capped at max bytes with a truncation notice.
func formatResult(res *mcp.CallToolResult, max int) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.URI, c.Name))
		case *mcp.EmbeddedResource:
			parts = append(parts, formatResource(c.Resource))
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && !containsJSON(parts, b) {
			parts = append(parts, string(b))
		}
	}
	return capText(strings.Join(parts, "\n"), max)
}

func formatResource(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Text != "":
		return r.Text
	default:
		return fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// containsJSON reports whether one of parts is the JSON value b, ignoring
// whitespace.
func containsJSON(parts []string, b []byte) bool {
	for _, p := range parts {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(p)) == nil && bytes.Equal(buf.Bytes(), b) {
			return true
		}
	}
	return false
}

// capText cuts s to at most max bytes on a rune boundary and appends a
// notice saying how much was left out. max <= 0 means no cap.
func capText(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s\n[truncated: showing %d of %d bytes]", s[:cut], cut, len(s))
}
