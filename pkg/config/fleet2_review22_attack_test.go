package config

import (
	"slices"
	"testing"
)

// The user name of a nats_url that has a password is not a secret, but
// Secrets lists it: with the README's own example
// ("nats://agent:${NATS_PASS}@10.0.0.5:4222") the log scrubber replaces
// every "agent" in the logs, the error log, outbox and job errors with
// "***" ("/var/lib/***/...", "***ctl fleet status"). Only a user without a
// password (NATS's token form) is a secret.
func TestReview22FleetURLUserIsNotASecret(t *testing.T) {
	cfg, _, _ := mustParse(t, "[wecom]\nenabled = true\ncorp_id = \"c\"\ncorp_secret = \"s\"\nagent_id = 1\ntoken = \"t\"\nencoding_aes_key = \"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\"\n[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://agent:s3cretpw@10.0.0.5:4222\"", nil)
	got := cfg.Secrets()
	if !slices.Contains(got, "s3cretpw") {
		t.Fatalf("the password is not a secret: %q", got)
	}
	if slices.Contains(got, "agent") {
		t.Fatalf("the NATS user name %q is scrubbed from every log line as a secret: %q", "agent", got)
	}
}
