// Package session keeps conversations: one open session per routing key in
// the daemon's SQLite database, with every message of the tool-use loop
// (assistant tool calls, tool results, reasoning) so a window read back is a
// request the provider accepts. /new closes the open session and starts
// another; closed sessions are kept.
//
// Before a request the caller runs the window through Repair (orphaned tool
// calls and results cause HTTP 400s) and then Prune (token budget).
//
// Routing keys (Key, P2P, Group, Thread, ParseKey) name the conversation a
// message belongs to; the channel is part of every key.
//
// Tables (pkg/store migration "sessions"): sessions(id, key, created_at,
// last_at, closed_at, message_count) with at most one open row per key, and
// session_messages(session_id, seq, role, content, parts, name, tool_calls,
// tool_call_id, reasoning_content, created_at), seq counting from 1 per
// session. Tool calls and multimodal parts are stored as JSON.
package session
