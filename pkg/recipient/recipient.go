// Package recipient decides whom a tool call may address: the message tool,
// scheduled jobs and the send_* tools all ask it before anything is queued.
//
// The rule: anyone may address themselves and the conversation they are in;
// owners (agent.owners, and the operator on the admin channel) may address
// any single user or chat; nobody reaches many people at once (WeCom "@all",
// "a|b|c" lists, tag or department targets) unless the configuration lets
// owners do so (security.owner_broadcast).
package recipient

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"agent/pkg/session"
)

// ErrRefused is wrapped by every refusal; the message says why, for the
// model.
var ErrRefused = errors.New("recipient refused")

// AdminChannel is the operator's channel (agentctl over the 0600 admin
// socket): its callers count as owners.
const AdminChannel = "admin"

// maxTo bounds a recipient id.
const maxTo = 256

// Policy is the recipient rule. IsOwner says whether a principal
// ("wecom:alice") is one of agent.owners; OwnerBroadcast whether owners may
// address many people at once. Both follow configuration reloads; nil means
// no owners and no broadcast.
type Policy struct {
	IsOwner        func(principal string) bool
	OwnerBroadcast func() bool
}

// Caller is who asks: the channel and user of the conversation and its
// routing key (session.Key), as a tools.Call carries them.
type Caller struct {
	Channel string
	User    string
	Session string
}

// Principal is the caller as "channel:user".
func (c Caller) Principal() string { return c.Channel + ":" + c.User }

// Owner reports whether the caller is an owner.
func (p Policy) Owner(c Caller) bool {
	if c.Channel == AdminChannel {
		return true
	}
	return c.Channel != "" && c.User != "" && p.IsOwner != nil && p.IsOwner(c.Principal())
}

// Broadcast reports whether to names more than one person on a channel:
// "@all", a '|' or ',' separated list, or a tag, party or department
// target.
func Broadcast(to string) bool {
	t := strings.ToLower(strings.TrimSpace(to))
	if t == "@all" || strings.ContainsAny(t, "|,;") {
		return true
	}
	for _, p := range []string{"tag:", "party:", "dept:", "department:", "totag:", "toparty:", "@"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// Check decides whether c may address to on channel ("" = the caller's
// channel) and returns the recipient id without a "channel:" prefix. A
// refusal wraps ErrRefused and says what is allowed instead.
func (p Policy) Check(c Caller, channel, to string) (string, error) {
	channel = strings.TrimSpace(channel)
	if channel == "" {
		channel = c.Channel
	}
	to = strings.TrimSpace(to)
	if rest, ok := strings.CutPrefix(to, channel+":"); ok && channel != "" {
		to = rest
	}
	if err := validID(to); err != nil {
		return "", err
	}
	owner := p.Owner(c)
	if Broadcast(to) {
		if owner && p.OwnerBroadcast != nil && p.OwnerBroadcast() {
			return to, nil
		}
		if owner {
			return "", fmt.Errorf("%w: %q addresses many people at once; that needs security.owner_broadcast = true in the configuration", ErrRefused, to)
		}
		return "", fmt.Errorf("%w: %q addresses many people at once; only the assistant's owners may do that, and only when the configuration allows it", ErrRefused, to)
	}
	if channel == "wecom" && !wecomID(to) {
		return "", fmt.Errorf("%w: %q is not a WeCom user id (1 to 64 letters, digits, _ - @ . starting with a letter or digit)", ErrRefused, to)
	}
	if channel == c.Channel && to == c.User && c.User != "" {
		return to, nil // oneself
	}
	if inConversation(c.Session, channel, to) {
		return to, nil
	}
	if owner {
		return to, nil
	}
	return "", fmt.Errorf("%w: you may send only to yourself (%s) or the conversation you are in; messages to other people (here %s:%s) are for the assistant's owners", ErrRefused, c.Principal(), channel, to)
}

// inConversation reports whether channel:to is the chat of the session
// key (a group chat or a thread's chat) or its direct peer.
func inConversation(key, channel, to string) bool {
	if key == "" {
		return false
	}
	k, err := session.ParseKey(key)
	if err != nil {
		return false
	}
	return k.Channel == channel && k.ID == to
}

// wecomID reports whether to has the shape of a WeCom user (or chat) id:
// 1 to 64 bytes of letters, digits and _ - @ ., starting with a letter or
// digit. Anything else (lookalike characters, "＠all") is not a single
// WeCom user.
func wecomID(to string) bool {
	if to == "" || len(to) > 64 {
		return false
	}
	for i := 0; i < len(to); i++ {
		c := to[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-' || c == '@' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// validID refuses empty, over-long, non-UTF-8 and control-character ids.
func validID(to string) error {
	switch {
	case to == "":
		return fmt.Errorf("%w: no recipient given", ErrRefused)
	case len(to) > maxTo:
		return fmt.Errorf("%w: the recipient id is %d bytes, at most %d", ErrRefused, len(to), maxTo)
	case !utf8.ValidString(to):
		return fmt.Errorf("%w: the recipient id is not valid UTF-8", ErrRefused)
	}
	for _, r := range to {
		if unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: the recipient id %q contains spaces or control characters", ErrRefused, to)
		}
	}
	return nil
}
