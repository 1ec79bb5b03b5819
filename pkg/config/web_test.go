package config

// [web]: values that pass validation and break
// at run time, and the handling of the new secrets. Failing tests are
// findings; the rest record what held.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FINDING: an engine base URL with a query string passes validation, but
// the engines append their path to it ("https://searx.lan/?k=v" +
// "/search?q=..." asks "/" with the query "k=v/search?q=..."): every
// search then fails with "answered HTML, not JSON". A token put there
// (a SearXNG behind an authenticating proxy) is also shown unmasked by
// Redacted, which masks only a URL's password.
func TestWebBaseURLWithQueryIsRefused(t *testing.T) {
	for _, key := range []string{"searxng_base_url", "tavily_base_url", "brave_base_url", "github_base_url", "huggingface_base_url"} {
		text := "[web]\n" + key + " = \"https://engine.example/?token=s3cretT0ken\"\n"
		cfg, _, _, err := parseText(t, text, nil)
		if err == nil {
			t.Errorf("web.%s with a query string was accepted; searches would go to %q", key, "https://engine.example/?token=s3cretT0ken"+"/search?q=...")
			if strings.Contains(cfg.Redacted(), "s3cretT0ken") {
				t.Logf("and Redacted shows the token in it")
			}
		}
	}
}

// HELD: the new keys are secrets: masked by Redacted, listed by Secrets
// (the log scrubber), read from *_file (trailing newline trimmed), and a
// SearXNG password in its URL is masked too.
func TestWebSecrets(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "tavily.key")
	if err := os.WriteFile(keyFile, []byte("tvly-FILEKEY0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := mustParse(t, `
[web]
searxng_base_url = "https://ops:S3archPassw0rd@searx.lan:8888"
tavily_api_key_file = "`+keyFile+`"
brave_api_key = "${BRAVE}"
github_api_key = "ghp_INLINEGITHUBTOKEN0001"
huggingface_api_key = "hf_INLINEHFTOKEN00000001"
`, map[string]string{"BRAVE": "BSA-ENVKEY-000000001"})
	if cfg.Web.TavilyAPIKey != "tvly-FILEKEY0123456789" {
		t.Errorf("tavily_api_key_file read as %q", cfg.Web.TavilyAPIKey)
	}
	secrets := []string{"S3archPassw0rd", "tvly-FILEKEY0123456789", "BSA-ENVKEY-000000001", "ghp_INLINEGITHUBTOKEN0001", "hf_INLINEHFTOKEN00000001"}
	red := cfg.Redacted()
	for _, s := range secrets {
		if strings.Contains(red, s) {
			t.Errorf("Redacted shows %q", s)
		}
	}
	if !strings.Contains(red, "searx.lan:8888") {
		t.Errorf("Redacted lost the SearXNG host:\n%s", red)
	}
	listed := strings.Join(cfg.Secrets(), "\n")
	for _, s := range secrets {
		if !strings.Contains(listed, s) {
			t.Errorf("Secrets() misses %q", s)
		}
	}
}

// HELD: [web] values out of range or malformed are refused at load time.
func TestWebValidation(t *testing.T) {
	for _, text := range []string{
		"[web]\nengines = [\"google\"]",
		"[web]\nengines = [\"github\", \"github\"]",
		"[web]\ntimeout = \"0s\"",
		"[web]\ntimeout = \"10m\"",
		"[web]\nmax_results = 0",
		"[web]\nmax_results = 21",
		"[web]\nfetch_max_mb = 0",
		"[web]\nfetch_max_mb = 101",
		"[web]\nfetch_allow = [\"http://wiki\"]",
		"[web]\nfetch_allow = [\"0177.0.0.1\"]",
		"[web]\nfetch_allow = [\"fe80::1%eth0\"]",
		"[web]\nsearxng_base_url = \"ftp://searx.lan\"",
		"[web]\ngithub_base_url = \"\"",
		"[web]\nbrave_base_url = \"https://api.search.brave.com#x\"",
	} {
		if ps := problems(t, text, nil); len(ps) == 0 {
			t.Errorf("%q accepted", text)
		}
	}
}
