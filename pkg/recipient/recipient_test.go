package recipient

import (
	"errors"
	"strings"
	"testing"
)

func policy(broadcast bool) Policy {
	return Policy{
		IsOwner:        func(p string) bool { return p == "wecom:boss" },
		OwnerBroadcast: func() bool { return broadcast },
	}
}

func TestCheck(t *testing.T) {
	alice := Caller{Channel: "wecom", User: "alice", Session: "p2p:wecom:alice"}
	boss := Caller{Channel: "wecom", User: "boss", Session: "p2p:wecom:boss"}
	inGroup := Caller{Channel: "wecom", User: "alice", Session: "group:wecom:team1"}
	operator := Caller{Channel: "admin", User: "ops", Session: "p2p:admin:ops"}
	voice := Caller{Channel: "voice", User: "kitchen", Session: "p2p:voice:kitchen"}
	for _, tc := range []struct {
		name      string
		p         Policy
		c         Caller
		channel   string
		to        string
		want      string // "" = refused
		broadcast bool
	}{
		{"self", policy(false), alice, "", "alice", "alice", false},
		{"self with prefix", policy(false), alice, "wecom", "wecom:alice", "alice", false},
		{"other user", policy(false), alice, "", "bob", "", false},
		{"other user other channel", policy(false), alice, "voice", "alice", "", false},
		{"@all", policy(true), alice, "", "@all", "", true},
		{"pipe list", policy(true), alice, "", "ceo|cfo|hr", "", true},
		{"self in a pipe list", policy(true), alice, "", "alice|ceo", "", true},
		{"tag", policy(true), alice, "", "tag:3", "", true},
		{"group chat she is in", policy(false), inGroup, "", "team1", "team1", false},
		{"another group chat", policy(false), inGroup, "", "team2", "", false},
		{"owner to a user", policy(false), boss, "", "bob", "bob", false},
		{"owner to @all without config", policy(false), boss, "", "@all", "", true},
		{"owner to @ALL without config", policy(false), boss, "", "@ALL", "", true},
		{"owner to @all with config", policy(true), boss, "", "@all", "@all", true},
		{"owner pipe list with config", policy(true), boss, "", "a|b", "a|b", true},
		{"operator to a user", policy(false), operator, "wecom", "bob", "bob", false},
		{"operator to @all without config", policy(false), operator, "wecom", "@all", "", true},
		{"voice device to a wecom user", policy(false), voice, "wecom", "alice", "", false},
		{"control character", policy(false), boss, "", "bob\x00", "", false},
		{"newline", policy(false), boss, "", "bob\nalice", "", false},
		{"bidi override", policy(false), boss, "", "bob\u202e", "", false},
		{"empty", policy(false), boss, "", "  ", "", false},
		{"too long", policy(false), boss, "", strings.Repeat("a", 300), "", false},
		{"nil policy, self", Policy{}, alice, "", "alice", "alice", false},
		{"owner, fullwidth @all", policy(false), boss, "", "\uff20all", "", false},
		{"owner, fullwidth bar", policy(false), boss, "", "a\uff5cb", "", false},
		{"owner, not a wecom id", policy(false), boss, "", "bob/../x", "", false},
		{"owner, voice device id with a colon-free name", policy(false), boss, "voice", "kitchen-panel", "kitchen-panel", false},
		{"nil policy, other", Policy{}, alice, "", "bob", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.p.Check(tc.c, tc.channel, tc.to)
			if tc.want == "" {
				if err == nil || !errors.Is(err, ErrRefused) {
					t.Fatalf("Check(%q) = %q, %v; want a refusal", tc.to, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Check(%q) = %q, %v; want %q", tc.to, got, err, tc.want)
			}
			if Broadcast(tc.to) != tc.broadcast {
				t.Fatalf("Broadcast(%q) = %v", tc.to, !tc.broadcast)
			}
		})
	}
}

// FuzzCheck: whatever the recipient, a non-owner reaches only themselves
// or their conversation, and nothing with a separator gets through.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"alice", "@all", "a|b", "bob", "wecom:alice", "team1", "tag:1", "alice\x00"} {
		f.Add(s, "")
		f.Add(s, "wecom")
	}
	p := policy(true)
	c := Caller{Channel: "wecom", User: "alice", Session: "group:wecom:team1"}
	f.Fuzz(func(t *testing.T, to, channel string) {
		got, err := p.Check(c, channel, to)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("error does not wrap ErrRefused: %v", err)
			}
			return
		}
		if got != "alice" && got != "team1" {
			t.Fatalf("non-owner reached %q (channel %q)", got, channel)
		}
		if Broadcast(got) {
			t.Fatalf("non-owner broadcast %q", got)
		}
	})
}
