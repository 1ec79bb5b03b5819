package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wecomOn is a valid [wecom] section (the fleet needs it).
const wecomOn = "[wecom]\nenabled = true\ncorp_id = \"wx\"\ncorp_secret = \"s\"\nagent_id = 1\ntoken = \"t\"\nencoding_aes_key = \"jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C\"\n"

func TestFleetOffByDefault(t *testing.T) {
	cfg, _, _ := mustParse(t, "", nil)
	if cfg.Fleet.Enabled || cfg.Fleet.Replicas != 1 {
		t.Fatalf("fleet defaults %+v", cfg.Fleet)
	}
}

func TestFleetValidation(t *testing.T) {
	keys := func(ps []Problem) string {
		var k []string
		for _, p := range ps {
			k = append(k, p.Key)
		}
		return strings.Join(k, " ")
	}
	for _, c := range []struct{ text, want string }{
		{wecomOn + "[fleet]\nenabled = true", "fleet.nats_url fleet.box"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a.b\"\nnats_url = \"nats://h:4222\"", "fleet.box"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"http://h:4222\"", "fleet.nats_url"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://h:4222,h2\"", "fleet.nats_url"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://h\"\nreplicas = 0", "fleet.replicas"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://h\"\ndefault_home = \"*\"", "fleet.default_home"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://h\"\ncredentials_file = \"missing.creds\"", "fleet.credentials_file"},
		{wecomOn + "[fleet]\nenabled = true\nbox = \"a\"\nnats_url = \"nats://h\"\ntls_cert_file = \"/etc/hostname\"", "fleet.tls_key_file"},
	} {
		if got := keys(problems(t, c.text, nil)); got != c.want {
			t.Errorf("%q: problems at %q, want %q", c.text, got, c.want)
		}
	}
}

// The credentials file resolves against the config's directory, and a
// password in nats_url never shows in a dump.
func TestFleetPathsAndSecrets(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "fleet.creds"), []byte("x"), 0o600)
	cfg, _, err := Parse("config.toml", []byte(wecomOn+"[fleet]\nenabled = true\nbox = \"room-1\"\ningress = true\nnats_url = \"nats://agent:s3cret@10.0.0.5:4222,nats://10.0.0.6:4222\"\ncredentials_file = \"fleet.creds\""), dir, mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleet.CredentialsFile != filepath.Join(dir, "fleet.creds") {
		t.Fatalf("credentials_file %q", cfg.Fleet.CredentialsFile)
	}
	if dump := cfg.Redacted(); strings.Contains(dump, "s3cret") {
		t.Fatalf("the NATS password shows in the dump:\n%s", dump)
	}
}
