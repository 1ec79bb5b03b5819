package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// maxSSELine bounds one SSE line; a longer one is malformed.
const maxSSELine = 1 << 20

// callbackError wraps the Stream callback's error so the client returns it
// untouched and never retries.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }
func (e callbackError) Unwrap() error { return e.err }

// malformed returns an *APIError wrapping ErrMalformed; the client fills in
// the provider.
func malformed(format string, args ...any) *APIError {
	return &APIError{Err: ErrMalformed, Message: fmt.Sprintf(format, args...)}
}

// streamReader parses an SSE chat-completions stream and assembles the
// reply. It never panics on any input (FuzzStream).
type streamReader struct {
	emit    func(Delta) error
	onLine  func() // called after each line read (idle-timeout reset)
	emitted bool   // the callback has been called at least once

	content   strings.Builder
	reasoning strings.Builder
	calls     []*partialCall
	byIndex   map[int]int // provider index -> position in calls
	finish    string
	usage     *Usage
	model     string
	done      bool // [DONE] seen
}

type partialCall struct {
	key  int // provider index; arrival position when it sent none
	id   string
	name string
	args strings.Builder
}

// read consumes r (already size-limited by the caller) to the end of the
// stream. Errors: *APIError (malformed stream or an error event),
// callbackError, or the reader's own error (network, timeout).
func (s *streamReader) read(r io.Reader) (Response, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []string // data lines of the event being built
	flush := func() error {
		if len(data) == 0 {
			return nil
		}
		payload := strings.Join(data, "\n")
		data = data[:0]
		return s.event(payload)
	}
	for !s.done {
		line, err := readLine(br)
		if s.onLine != nil && (len(line) > 0 || err == nil) {
			s.onLine()
		}
		if err != nil && err != io.EOF {
			return s.response(), err
		}
		eof := err == io.EOF
		switch {
		case len(line) == 0:
			if ferr := flush(); ferr != nil {
				return s.response(), ferr
			}
		case line[0] == ':': // comment / keep-alive
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if field != "data" {
				continue // event:, id:, retry:
			}
			data = append(data, value)
			// Servers put one JSON object per data line; dispatch at
			// once so a missing blank line cannot glue two together.
			if v := strings.TrimSpace(value); v == "[DONE]" || (len(data) == 1 && json.Valid([]byte(v))) {
				if ferr := flush(); ferr != nil {
					return s.response(), ferr
				}
			}
		}
		if eof {
			if ferr := flush(); ferr != nil {
				return s.response(), ferr
			}
			break
		}
	}
	resp := s.response()
	if !s.done && s.finish == "" {
		return resp, malformed("stream ended before [DONE]")
	}
	return resp, nil
}

// readLine reads one line without its \n or \r\n. A line over maxSSELine is
// an error.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxSSELine {
			return "", malformed("SSE line longer than %d bytes", maxSSELine)
		}
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		return string(buf), err
	}
}

func (s *streamReader) event(payload string) error {
	payload = strings.TrimSpace(payload)
	if payload == "" {
		return nil
	}
	if payload == "[DONE]" {
		s.done = true
		return nil
	}
	var chunk wireResponse
	if err := json.Unmarshal([]byte(payload), &chunk); err != nil {
		return malformed("bad stream chunk %q: %v", excerpt([]byte(payload)), err)
	}
	if chunk.Error != nil && (chunk.Error.Message != "" || chunk.Error.Code != "") {
		return &APIError{Err: classifyStatus(500, chunk.Error.Code), Code: chunk.Error.Code, Message: chunk.Error.Message}
	}
	if chunk.Model != "" {
		s.model = chunk.Model
	}
	if chunk.Usage != nil {
		u := *chunk.Usage
		s.usage = &u
	}
	for _, c := range chunk.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.finish = *c.FinishReason
		}
		d := c.Delta
		if d == nil {
			continue
		}
		if err := s.delta(d); err != nil {
			return err
		}
		break // only the first choice is used
	}
	return nil
}

func (s *streamReader) delta(d *wireRespMessage) error {
	var out Delta
	content, err := decodeContent(d.Content)
	if err != nil {
		return malformed("bad delta content: %v", err)
	}
	out.Content = content
	s.content.WriteString(content)
	out.Reasoning = d.ReasoningContent
	if out.Reasoning == "" {
		out.Reasoning = d.Reasoning
	}
	s.reasoning.WriteString(out.Reasoning)
	for _, tc := range d.ToolCalls {
		args := decodeArguments(tc.Function.Arguments)
		idx := s.callFor(tc.Index, tc.ID, tc.Function.Name)
		pc := s.calls[idx]
		if pc.id == "" && tc.ID != "" {
			pc.id = tc.ID // a known id is never replaced, least of all by ""
		}
		if pc.name == "" {
			pc.name = tc.Function.Name
		}
		pc.args.WriteString(args)
		if pc.args.Len() > defaultMaxBody {
			return malformed("tool-call arguments too long")
		}
		out.ToolCalls = append(out.ToolCalls, ToolCallDelta{Index: pc.key, ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	if out.Content == "" && out.Reasoning == "" && len(out.ToolCalls) == 0 {
		return nil
	}
	s.emitted = true
	if s.emit != nil {
		if err := s.emit(out); err != nil {
			return callbackError{err}
		}
	}
	return nil
}

// callFor returns the position in s.calls of the call a fragment belongs to.
// Fragments are keyed by index. A fragment with no index continues the last
// call unless it brings a new id. A fragment whose index is taken by a call
// with a different non-empty id and that names a function is a new call
// (servers that send several whole calls with the same index).
func (s *streamReader) callFor(index *int, id, name string) int {
	if s.byIndex == nil {
		s.byIndex = map[int]int{}
	}
	newCall := func(key int) int {
		pos := len(s.calls)
		s.calls = append(s.calls, &partialCall{key: key})
		s.byIndex[key] = pos
		return pos
	}
	if index == nil {
		if id != "" {
			for i, c := range s.calls {
				if c.id == id {
					return i
				}
			}
			return newCall(len(s.calls))
		}
		if len(s.calls) == 0 {
			return newCall(0)
		}
		return len(s.calls) - 1
	}
	pos, ok := s.byIndex[*index]
	if !ok {
		return newCall(*index)
	}
	if c := s.calls[pos]; id != "" && c.id != "" && id != c.id && name != "" {
		return newCall(*index)
	}
	return pos
}

func (s *streamReader) response() Response {
	resp := Response{Model: s.model, FinishReason: s.finish}
	resp.Message = Message{Role: RoleAssistant, Content: s.content.String(), ReasoningContent: s.reasoning.String()}
	// Calls come out in provider index order (stable: equal indexes keep
	// arrival order).
	calls := make([]*partialCall, len(s.calls))
	copy(calls, s.calls)
	sort.SliceStable(calls, func(a, b int) bool { return calls[a].key < calls[b].key })
	for i, pc := range calls {
		call := ToolCall{ID: pc.id, Type: "function", Function: FunctionCall{Name: pc.name, Arguments: pc.args.String()}}
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_%d", i)
		}
		if strings.TrimSpace(call.Function.Arguments) == "" {
			call.Function.Arguments = "{}"
		}
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, call)
	}
	resp.FinishReason = normaliseFinish(resp.FinishReason, len(resp.Message.ToolCalls) > 0)
	if s.usage != nil {
		resp.Usage = *s.usage
	}
	return resp
}

var errStreamTooLarge = errors.New("stream larger than the size limit")
