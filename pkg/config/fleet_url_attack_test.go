package config

import (
	"slices"
	"strings"
	"testing"
)

// nats_url holds several URLs; a password in any but the first is not
// masked in the dump and not among Secrets (so the log scrubber misses it).
func TestFleetSecondURLPassword(t *testing.T) {
	cfg, _, _ := mustParse(t, wecomOn+"[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://10.0.0.5:4222,nats://agent:s3cret@10.0.0.6:4222\"", nil)
	if dump := cfg.Redacted(); strings.Contains(dump, "s3cret") {
		t.Errorf("the second URL's password shows in the dump:\n%s", dump)
	}
	if !slices.Contains(cfg.Secrets(), "s3cret") {
		t.Errorf("the second URL's password is not a secret: %q", cfg.Secrets())
	}
}

// NATS takes a token as the URL's user ("nats://TOKEN@host", nats.go's
// token auth); it shows in the dump and is not scrubbed, while the same
// token in fleet.token is.
func TestFleetTokenInURL(t *testing.T) {
	cfg, _, _ := mustParse(t, wecomOn+"[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://s3cr3ttoken@10.0.0.5:4222\"", nil)
	if dump := cfg.Redacted(); strings.Contains(dump, "s3cr3ttoken") {
		t.Errorf("a NATS token in nats_url shows in the dump")
	}
	if !slices.Contains(cfg.Secrets(), "s3cr3ttoken") {
		t.Errorf("a NATS token in nats_url is not a secret: %q", cfg.Secrets())
	}
}

// A nats_url that does not parse is quoted in the problem with its
// password (redactURL returns a URL it cannot parse unchanged).
func TestFleetBadURLProblemQuotesPassword(t *testing.T) {
	for _, u := range []string{"nats://agent:s3cret@bad host:4222", "nats://agent:s3cret@[::1:4222"} {
		ps := problems(t, wecomOn+"[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \""+u+"\"", nil)
		for _, p := range ps {
			if strings.Contains(p.Reason, "s3cret") {
				t.Errorf("%s: the problem quotes the password: %q", p.Key, p.Reason)
			}
		}
	}
}

// fleet.enabled on a box without the WeCom app channel: the fleet carries
// only WeCom's messages, and a box without the channel drops (Terms) every
// message of the users homed on it. Not refused, not even a warning.
func TestFleetWithoutWeCom(t *testing.T) {
	_, warns, _, err := parseText(t, "[llm]\napi_key = \"k\"\n[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://10.0.0.5:4222\"", nil)
	if err == nil && len(warns) == 0 {
		t.Fatal("fleet.enabled with wecom.enabled = false is accepted silently")
	}
}

// The user name of a nats_url that has a password is not a secret, but
// Secrets lists it: with the README's own example
// ("nats://agent:${NATS_PASS}@10.0.0.5:4222") the log scrubber replaces
// every "agent" in the logs, the error log, outbox and job errors with
// "***" ("/var/lib/***/...", "***ctl fleet status"). Only a user without a
// password (NATS's token form) is a secret.
func TestFleetURLUserIsNotASecret(t *testing.T) {
	cfg, _, _ := mustParse(t, "[wecom]\nenabled = true\ncorp_id = \"c\"\ncorp_secret = \"s\"\nagent_id = 1\ntoken = \"t\"\nencoding_aes_key = \"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\"\n[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://agent:s3cretpw@10.0.0.5:4222\"", nil)
	got := cfg.Secrets()
	if !slices.Contains(got, "s3cretpw") {
		t.Fatalf("the password is not a secret: %q", got)
	}
	if slices.Contains(got, "agent") {
		t.Fatalf("the NATS user name %q is scrubbed from every log line as a secret: %q", "agent", got)
	}
}
