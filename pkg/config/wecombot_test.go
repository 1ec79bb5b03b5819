package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWeComBotSection(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "bot.secret")
	if err := os.WriteFile(secret, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := mustParse(t, "[wecom_bot]\nenabled = true\nbot_id = \"b1\"\nsecret_file = \""+secret+"\"\nwelcome = \"hi\"\n", nil)
	if b := cfg.WeComBot; !b.Enabled || b.BotID != "b1" || b.Secret != "s3cret-from-file" || b.URL != DefaultWeComBotURL || b.Welcome != "hi" {
		t.Fatalf("wecom_bot: %+v", b)
	}
	if strings.Contains(cfg.Redacted(), "s3cret-from-file") {
		t.Fatal("the bot's secret shows in the redacted dump")
	}
	for text, want := range map[string]string{
		"[wecom_bot]\nenabled = true\nsecret = \"s\"\n":              "wecom_bot.bot_id",
		"[wecom_bot]\nenabled = true\nbot_id = \"b\"\n":              "wecom_bot.secret",
		"[wecom_bot]\nurl = \"https://openws.work.weixin.qq.com\"\n": "wss://",
		"[wecom_bot]\nurl = \"ws://bot.example.com/ws\"\n":           "clear text",
	} {
		if _, _, _, err := parseText(t, text, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	if _, _, _, err := parseText(t, "[wecom_bot]\nurl = \"ws://127.0.0.1:9000\"\n", nil); err != nil {
		t.Errorf("a loopback test server: %v", err)
	}
}
