package session

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Key is a routing key: the conversation a message belongs to. Its forms are
//
//	p2p:<channel>:<sender>            a direct conversation with one user
//	group:<channel>:<chat>            a group chat
//	thread:<channel>:<chat>:<thread>  a thread inside a group chat
//
// The channel is always part of the key, so the same id on two channels
// (wecom "zhangsan" and voice "zhangsan") are two conversations. For p2p the
// part after "p2p:" ("wecom:zhangsan") is exactly the form allow_from uses.
//
// The channel is a lowercase name ([a-z][a-z0-9_-]*, at most 32 bytes). Ids
// are any non-empty UTF-8 text of at most maxIDLen bytes; inside the key the
// bytes ':' and '%' and control characters are percent-escaped (%3A, %25,
// upper-case hex), so a key splits unambiguously and every key has exactly
// one spelling.
type Key string

// Kind is the kind of a routing key.
type Kind string

// Kinds of routing key.
const (
	KindP2P    Kind = "p2p"
	KindGroup  Kind = "group"
	KindThread Kind = "thread"
)

const (
	maxChannelLen = 32
	maxIDLen      = 256
	maxKeyLen     = 16 + maxChannelLen + 2*3*maxIDLen
)

// ErrBadKey is returned for a key or key part that is not valid.
var ErrBadKey = errors.New("invalid routing key")

// KeyParts is a parsed routing key. ID is the sender (p2p) or the chat
// (group, thread), unescaped; Thread is set for KindThread only.
type KeyParts struct {
	Kind    Kind
	Channel string
	ID      string
	Thread  string
}

// P2P returns the key of a direct conversation with sender on channel. A
// sender already written as "<channel>:<id>" (the allow_from form) is not
// prefixed twice.
func P2P(channel, sender string) (Key, error) {
	return KeyParts{Kind: KindP2P, Channel: channel, ID: stripChannel(channel, sender)}.key()
}

// Group returns the key of group chat on channel.
func Group(channel, chat string) (Key, error) {
	return KeyParts{Kind: KindGroup, Channel: channel, ID: stripChannel(channel, chat)}.key()
}

// Thread returns the key of thread inside group chat on channel.
func Thread(channel, chat, thread string) (Key, error) {
	return KeyParts{Kind: KindThread, Channel: channel, ID: stripChannel(channel, chat), Thread: thread}.key()
}

func stripChannel(channel, id string) string {
	if channel != "" {
		if rest, ok := strings.CutPrefix(id, channel+":"); ok {
			return rest
		}
	}
	return id
}

// Key returns the key p describes, or an error when a part is invalid.
func (p KeyParts) Key() (Key, error) { return p.key() }

func (p KeyParts) key() (Key, error) {
	if err := checkChannel(p.Channel); err != nil {
		return "", err
	}
	if err := checkID("id", p.ID); err != nil {
		return "", err
	}
	switch p.Kind {
	case KindP2P, KindGroup:
		if p.Thread != "" {
			return "", fmt.Errorf("session: %w: %s key has a thread", ErrBadKey, p.Kind)
		}
		return Key(string(p.Kind) + ":" + p.Channel + ":" + escape(p.ID)), nil
	case KindThread:
		if err := checkID("thread", p.Thread); err != nil {
			return "", err
		}
		return Key(string(p.Kind) + ":" + p.Channel + ":" + escape(p.ID) + ":" + escape(p.Thread)), nil
	default:
		return "", fmt.Errorf("session: %w: unknown kind %q", ErrBadKey, p.Kind)
	}
}

// ParseKey validates s and splits it into its parts. Only the canonical
// spelling that P2P, Group and Thread produce is accepted.
func ParseKey(s string) (KeyParts, error) {
	if len(s) > maxKeyLen {
		return KeyParts{}, fmt.Errorf("session: %w: longer than %d bytes", ErrBadKey, maxKeyLen)
	}
	f := strings.Split(s, ":")
	var p KeyParts
	switch {
	case len(f) == 3 && (f[0] == string(KindP2P) || f[0] == string(KindGroup)):
	case len(f) == 4 && f[0] == string(KindThread):
	default:
		return KeyParts{}, fmt.Errorf("session: %w: %q is not p2p:CHANNEL:SENDER, group:CHANNEL:CHAT or thread:CHANNEL:CHAT:THREAD", ErrBadKey, s)
	}
	p.Kind, p.Channel = Kind(f[0]), f[1]
	var err error
	if p.ID, err = unescape(f[2]); err != nil {
		return KeyParts{}, err
	}
	if len(f) == 4 {
		if p.Thread, err = unescape(f[3]); err != nil {
			return KeyParts{}, err
		}
	}
	k, err := p.key()
	if err != nil {
		return KeyParts{}, err
	}
	if string(k) != s {
		return KeyParts{}, fmt.Errorf("session: %w: %q is not in canonical form (want %q)", ErrBadKey, s, k)
	}
	return p, nil
}

// Parts parses k; see ParseKey.
func (k Key) Parts() (KeyParts, error) { return ParseKey(string(k)) }

func checkChannel(c string) error {
	if c == "" || len(c) > maxChannelLen {
		return fmt.Errorf("session: %w: channel %q must be 1 to %d bytes", ErrBadKey, c, maxChannelLen)
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		ok := b >= 'a' && b <= 'z' || i > 0 && (b >= '0' && b <= '9' || b == '_' || b == '-')
		if !ok {
			return fmt.Errorf("session: %w: channel %q must match [a-z][a-z0-9_-]*", ErrBadKey, c)
		}
	}
	return nil
}

func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("session: %w: empty %s", ErrBadKey, what)
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("session: %w: %s longer than %d bytes", ErrBadKey, what, maxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("session: %w: %s is not valid UTF-8", ErrBadKey, what)
	}
	return nil
}

func needsEscape(b byte) bool { return b == ':' || b == '%' || b < 0x20 || b == 0x7f }

const upperHex = "0123456789ABCDEF"

func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("session: %w: truncated escape in %q", ErrBadKey, s)
		}
		hi, lo := strings.IndexByte(upperHex, s[i+1]), strings.IndexByte(upperHex, s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("session: %w: bad escape in %q", ErrBadKey, s)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

// MemoryScope is whose long-term memory a conversation reads and writes: the
// sender ("<channel>:<sender>") in a direct conversation, the chat
// ("group:<channel>:<chat>", threads included) in a group, so nothing a
// user told the agent privately is recalled in front of others.
func (k Key) MemoryScope() (string, error) {
	p, err := ParseKey(string(k))
	if err != nil {
		return "", err
	}
	if p.Kind == KindP2P {
		return p.Channel + ":" + p.ID, nil
	}
	g, err := Group(p.Channel, p.ID)
	return string(g), err
}
