package mcp

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
)

// maxNameLen is the longest tool name the registry accepts.
const maxNameLen = 64

// sanitize replaces every character outside [a-zA-Z0-9_-] with '_'. An empty
// input becomes "_".
func sanitize(s string) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// shortHash is 8 hex digits derived from the server and tool names, used to
// make truncated or colliding names unique and stable across restarts.
func shortHash(server, tool string) string {
	h := fnv.New32a()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	return fmt.Sprintf("%08x", h.Sum32())
}

// withSuffix returns base cut so that "_"+suffix fits in maxNameLen, then
// "_"+suffix.
func withSuffix(base, suffix string) string {
	keep := maxNameLen - 1 - len(suffix)
	if len(base) > keep {
		base = base[:keep]
	}
	return base + "_" + suffix
}

// ToolName is the registry name of tool on server: SERVER__TOOL with both
// parts sanitised to [a-zA-Z0-9_-]. A name over 64 bytes is cut and given a
// hash of the original names so that it stays unique.
func ToolName(server, tool string) string {
	name := sanitize(server) + "__" + sanitize(tool)
	if len(name) > maxNameLen {
		name = withSuffix(name, shortHash(server, tool))
	}
	return name
}

// altToolName is the name given to a tool whose ToolName is already taken
// by a tool that sorts before it.
func altToolName(server, tool string) string {
	return withSuffix(ToolName(server, tool), shortHash("alt\x00"+server, tool))
}

// objectSchema turns a server's input schema into the JSON object schema the
// registry requires: a missing or non-object schema becomes
// {"type":"object"}, a missing "type" is set to "object", and "properties" or
// "required" of the wrong JSON type are dropped.
func objectSchema(schema any) json.RawMessage {
	fallback := json.RawMessage(`{"type":"object"}`)
	if schema == nil {
		return fallback
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return fallback
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fallback
	}
	if t, ok := m["type"]; ok {
		var typ string
		if err := json.Unmarshal(t, &typ); err != nil || typ != "object" {
			return fallback
		}
	} else {
		m["type"] = json.RawMessage(`"object"`)
	}
	if p, ok := m["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(p, &props); err != nil || props == nil {
			delete(m, "properties")
		}
	}
	if r, ok := m["required"]; ok {
		var req []string
		if err := json.Unmarshal(r, &req); err != nil {
			delete(m, "required")
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return fallback
	}
	return out
}
