package aibot_test

import (
	"encoding/json"
	"testing"

	"agent/pkg/wecom/aibot"
)

// FuzzDecode: any bytes from the connection. Decode never panics; what it
// accepts re-encodes, and a callback's body parses or fails cleanly.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"aibot_msg_callback","headers":{"req_id":"r1"},"body":{"msgid":"m","chattype":"group","chatid":"c","from":{"userid":"u"},"msgtype":"mixed","mixed":{"msg_item":[{"msgtype":"text","text":{"content":"@bot hi"}},{"msgtype":"image","image":{"url":"https://x/y","aeskey":"k"}}]}}}`,
		`{"cmd":"aibot_event_callback","headers":{"req_id":"r2"},"body":{"msgtype":"event","event":{"eventtype":"disconnected_event"}}}`,
		`{"headers":{"req_id":"ping_1_2"},"errcode":0,"errmsg":"ok"}`,
		`{"headers":{"req_id":"x"},"errcode":-1}`, `{}`, `{"body":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := aibot.Decode(data)
		if err != nil {
			return
		}
		if _, err := json.Marshal(fr); err != nil {
			t.Fatalf("accepted frame does not encode: %v", err)
		}
		_ = fr.Err()
		if len(fr.Body) > 0 {
			if m, err := aibot.ParseMessage(fr.Body); err == nil {
				_ = m.VoiceText()
			}
		}
	})
}
