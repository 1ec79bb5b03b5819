package fleet

import (
	"fmt"
	"strings"
)

// ValidBox reports whether name can be a box's name: 1 to 32 letters,
// digits, '_' or '-' (it is a token of NATS subjects and a consumer name).
func ValidBox(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// maxConv bounds a conversation's name (a WeCom user or chat id).
const maxConv = 256

// escape makes any text one token of a NATS subject and a KV key: bytes
// other than letters, digits, '_' and '-' become "=XX" (hex). It is
// reversible, so the token names exactly one conversation.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: %q", ErrBadName, s)
		}
		var v byte
		if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &v); err != nil {
			return "", fmt.Errorf("%w: %q", ErrBadName, s)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

// Subject is the stream subject of a conversation of channel.
func Subject(channel, conv string) (string, error) {
	if !ValidBox(channel) || conv == "" || len(conv) > maxConv {
		return "", fmt.Errorf("%w: conversation %q of channel %q", ErrBadName, conv, channel)
	}
	return SubjectRoot + "." + channel + "." + escape(conv), nil
}

// ParseSubject is Subject's inverse.
func ParseSubject(subj string) (channel, conv string, err error) {
	rest, ok := strings.CutPrefix(subj, SubjectRoot+".")
	if !ok {
		return "", "", fmt.Errorf("%w: subject %q", ErrBadName, subj)
	}
	channel, tok, ok := strings.Cut(rest, ".")
	if !ok || !ValidBox(channel) || tok == "" || strings.Contains(tok, ".") {
		return "", "", fmt.Errorf("%w: subject %q", ErrBadName, subj)
	}
	conv, err = unescape(tok)
	if err != nil || conv == "" || len(conv) > maxConv || escape(conv) != tok {
		return "", "", fmt.Errorf("%w: subject %q", ErrBadName, subj)
	}
	return channel, conv, nil
}

// HomeKey is a conversation's key in agent_homes.
func HomeKey(channel, conv string) string { return channel + "." + escape(conv) }

// ParseHomeKey is HomeKey's inverse.
func ParseHomeKey(k string) (channel, conv string, err error) {
	channel, tok, ok := strings.Cut(k, ".")
	if !ok || !ValidBox(channel) {
		return "", "", fmt.Errorf("%w: home key %q", ErrBadName, k)
	}
	conv, err = unescape(tok)
	if err != nil || conv == "" || escape(conv) != tok {
		return "", "", fmt.Errorf("%w: home key %q", ErrBadName, k)
	}
	return channel, conv, nil
}
