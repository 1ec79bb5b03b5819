package session

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"agent/pkg/llm"
)

// Token estimate constants.
const (
	messageOverhead = 4   // role, separators
	callOverhead    = 3   // per tool call: type, braces
	imageTokens     = 765 // one high-detail 512px tile plus base, a typical image
)

// EstimateTokens is a cheap estimate of the tokens m costs in a request: CJK
// characters (and full-width punctuation) about one token each, other text
// about four characters a token, an image a fixed 765, plus a small
// overhead per message and per tool call. It is meant for budgeting, not
// billing.
func EstimateTokens(m llm.Message) int {
	n := messageOverhead + textTokens(m.Content) + textTokens(m.ReasoningContent) +
		textTokens(m.Name) + textTokens(m.ToolCallID)
	for _, p := range m.Parts {
		if p.Type == "image_url" {
			n += imageTokens
			continue
		}
		n += textTokens(p.Text)
	}
	for _, c := range m.ToolCalls {
		n += callOverhead + textTokens(c.ID) + textTokens(c.Function.Name) + textTokens(c.Function.Arguments)
	}
	return n
}

func textTokens(s string) int {
	cjk, other := 0, 0
	for _, r := range s {
		if isCJK(r) {
			cjk++
		} else {
			other++
		}
	}
	return cjk + (other+3)/4
}

func isCJK(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		r >= 0x3000 && r <= 0x303F || // CJK symbols and punctuation
		r >= 0xFF00 && r <= 0xFFEF // full-width forms
}

// prunedStub is the content that replaces a pruned tool result.
func prunedStub(content string) string {
	return fmt.Sprintf("[tool result pruned: %d chars]", utf8.RuneCountInString(content))
}

// Prune returns msgs cut down to about budget tokens as measured by count
// (EstimateTokens when nil). It expects a history that passes Valid (run
// Repair first) and keeps it valid. In order, while over budget:
//
//  1. the content of tool results before the latest user message is replaced
//     by "[tool result pruned: N chars]", oldest first (the call and the
//     result stay, so the pairing holds);
//  2. whole turns are dropped, oldest first, each from a user message up to
//     the next one, so no tool exchange is split; leading system messages and
//     the latest user message with everything after it are never dropped;
//  3. the tool results of the current turn (after the latest user message)
//     are pruned like in 1, oldest first.
//
// The result may still exceed budget when what must be kept is larger.
// msgs is not modified.
func Prune(msgs []llm.Message, budget int, count func(llm.Message) int) []llm.Message {
	if count == nil {
		count = EstimateTokens
	}
	total := 0
	for _, m := range msgs {
		total += count(m)
	}
	out := append([]llm.Message(nil), msgs...)
	if total <= budget {
		return out
	}
	head := 0
	for head < len(out) && out[head].Role == llm.RoleSystem {
		head++
	}
	lastUser := -1
	for i := len(out) - 1; i >= head; i-- {
		if out[i].Role == llm.RoleUser {
			lastUser = i
			break
		}
	}
	stub := func(from, to int) {
		for i := from; i < to && total > budget; i++ {
			m := out[i]
			if m.Role != llm.RoleTool {
				continue
			}
			text := m.Content
			for _, p := range m.Parts {
				text += p.Text
			}
			s := prunedStub(text)
			if len(m.Parts) == 0 && len(s) >= len(m.Content) {
				continue // already short (or already a stub)
			}
			before := count(m)
			m.Content, m.Parts = s, nil
			after := count(m)
			if after >= before {
				continue
			}
			out[i] = m
			total += after - before
		}
	}
	// 1. Old tool results.
	if lastUser >= 0 {
		stub(head, lastUser)
	} else {
		stub(head, len(out))
	}
	if total <= budget || lastUser < 0 {
		return out
	}
	// 2. Whole turns, oldest first: cut [head, next user message).
	cut := head
	for total > budget && cut < lastUser {
		next := cut + 1
		for next < lastUser && out[next].Role != llm.RoleUser {
			next++
		}
		for _, m := range out[cut:next] {
			total -= count(m)
		}
		cut = next
	}
	if cut > head {
		out = append(out[:head], out[cut:]...)
		lastUser -= cut - head
	}
	// 3. The current turn's tool results.
	stub(lastUser, len(out))
	return out
}
