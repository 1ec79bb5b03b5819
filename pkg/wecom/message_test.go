package wecom

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseMessageTypes(t *testing.T) {
	const head = `<xml><ToUserName><![CDATA[corp]]></ToUserName><FromUserName><![CDATA[alice]]></FromUserName><CreateTime>1700000000</CreateTime>`
	const tail = `<AgentID>1000002</AgentID></xml>`
	tests := []struct {
		name string
		body string
		want Message
	}{
		{"text", `<MsgType><![CDATA[text]]></MsgType><Content><![CDATA[hi <b>&amp; 你好]]></Content><MsgId>1234567890123456</MsgId>`,
			Message{MsgType: MsgText, Content: "hi <b>&amp; 你好", MsgID: "1234567890123456"}},
		{"escaped text", `<MsgType>text</MsgType><Content>a &lt; b &amp; c</Content><MsgId>1</MsgId>`,
			Message{MsgType: MsgText, Content: "a < b & c", MsgID: "1"}},
		{"image", `<MsgType>image</MsgType><PicUrl>http://p/x.jpg</PicUrl><MediaId>m1</MediaId><MsgId>2</MsgId>`,
			Message{MsgType: MsgImage, PicURL: "http://p/x.jpg", MediaID: "m1", MsgID: "2"}},
		{"voice", `<MsgType>voice</MsgType><MediaId>m2</MediaId><Format>amr</Format><MsgId>3</MsgId>`,
			Message{MsgType: MsgVoice, MediaID: "m2", Format: "amr", MsgID: "3"}},
		{"video", `<MsgType>video</MsgType><MediaId>m3</MediaId><ThumbMediaId>t3</ThumbMediaId><MsgId>4</MsgId>`,
			Message{MsgType: MsgVideo, MediaID: "m3", ThumbMediaID: "t3", MsgID: "4"}},
		{"file", `<MsgType>file</MsgType><MediaId>m4</MediaId><FileName>report.pdf</FileName><MsgId>5</MsgId>`,
			Message{MsgType: MsgFile, MediaID: "m4", FileName: "report.pdf", MsgID: "5"}},
		{"location", `<MsgType>location</MsgType><Location_X>23.13</Location_X><Location_Y>113.26</Location_Y><Scale>15</Scale><Label>Canton</Label><MsgId>6</MsgId>`,
			Message{MsgType: MsgLocation, LocationX: "23.13", LocationY: "113.26", Scale: "15", Label: "Canton", MsgID: "6"}},
		{"link", `<MsgType>link</MsgType><Title>T</Title><Description>D</Description><Url>http://u</Url><PicUrl>http://p</PicUrl><MsgId>7</MsgId>`,
			Message{MsgType: MsgLink, Title: "T", Description: "D", URL: "http://u", PicURL: "http://p", MsgID: "7"}},
		{"event", `<MsgType>event</MsgType><Event>click</Event><EventKey>k</EventKey>`,
			Message{MsgType: MsgEvent, Event: "click", EventKey: "k"}},
		{"unknown type kept", `<MsgType>hologram</MsgType><MsgId>8</MsgId><Unknown><Nested>x</Nested></Unknown>`,
			Message{MsgType: "hologram", MsgID: "8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMessage([]byte(head + tt.body + tail))
			if err != nil {
				t.Fatalf("ParseMessage: %v", err)
			}
			want := tt.want
			want.XMLName = got.XMLName
			want.ToUserName, want.FromUserName, want.CreateTime, want.AgentID = "corp", "alice", 1700000000, 1000002
			if *got != want {
				t.Fatalf("got  %+v\nwant %+v", *got, want)
			}
			// XML() round-trips.
			b, err := got.XML()
			if err != nil {
				t.Fatalf("XML: %v", err)
			}
			again, err := ParseMessage(b)
			if err != nil || *again != *got {
				t.Fatalf("round trip = %+v, %v", again, err)
			}
		})
	}
}

func TestParseMessageErrors(t *testing.T) {
	big := "<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>" +
		strings.Repeat("x", MaxBodyBytes) + "</Content></xml>"
	deep := "<xml><FromUserName>a</FromUserName><MsgType>text</MsgType>" +
		strings.Repeat("<a>", 100) + strings.Repeat("</a>", 100) + "</xml>"
	tests := []struct {
		name string
		body string
		want error
	}{
		{"empty", "", ErrBadXML},
		{"whitespace", "  \n", ErrBadXML},
		{"truncated", "<xml><FromUserName>a</FromUserName><MsgType>te", ErrBadXML},
		{"unclosed", "<xml><FromUserName>a</FromUserName><MsgType>text</MsgType>", ErrBadXML},
		{"mismatched", "<xml><FromUserName>a</MsgType></xml>", ErrBadXML},
		{"huge", big, ErrTooLarge},
		{"deep", deep, ErrBadXML},
		{"doctype", `<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY x "boom">]><xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>&x;</Content></xml>`, ErrDTD},
		{"billion laughs", `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><xml><Content>&lol2;</Content></xml>`, ErrDTD},
		{"external entity", `<!DOCTYPE xml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><xml><Content>&xxe;</Content></xml>`, ErrDTD},
		{"undefined entity", `<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>&xxe;</Content></xml>`, ErrBadXML},
		{"directive inside", `<xml><FromUserName>a</FromUserName><!DOCTYPE x><MsgType>text</MsgType></xml>`, ErrDTD},
		{"wrong root", `<msg><FromUserName>a</FromUserName><MsgType>text</MsgType></msg>`, ErrBadXML},
		{"no MsgType", `<xml><FromUserName>a</FromUserName></xml>`, ErrBadXML},
		{"no FromUserName", `<xml><MsgType>text</MsgType></xml>`, ErrBadXML},
		{"bad CreateTime", `<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><CreateTime>soon</CreateTime></xml>`, ErrBadXML},
		{"not xml", `{"MsgType":"text"}`, ErrBadXML},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMessage([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseMessage = %+v, %v; want %v", m, err, tt.want)
			}
		})
	}
}

func TestDTDErrorIsClear(t *testing.T) {
	_, err := ParseMessage([]byte(`<!DOCTYPE xml><xml/>`))
	if err == nil || !strings.Contains(err.Error(), "DOCTYPE") {
		t.Fatalf("error %v does not name the DOCTYPE", err)
	}
}

func TestParseEnvelope(t *testing.T) {
	env, err := ParseEnvelope(sampleBody())
	if err != nil {
		t.Fatalf("ParseEnvelope: %v", err)
	}
	if env.Encrypt != sampleEncrypt || env.ToUserName != sampleReceiveID || env.AgentID != "218" {
		t.Fatalf("envelope = %+v", env)
	}
	for _, bad := range []string{"", "<xml></xml>", "<xml><Encrypt>abc", `<!DOCTYPE x><xml><Encrypt>a</Encrypt></xml>`} {
		if _, err := ParseEnvelope([]byte(bad)); err == nil {
			t.Errorf("ParseEnvelope(%q) = nil error", bad)
		}
	}
}

func TestDecryptMessageErrors(t *testing.T) {
	c := sampleCrypto(t)
	if _, err := c.DecryptMessage("bad", sampleMsgTS, sampleMsgNonce, sampleBody()); !errors.Is(err, ErrSignature) {
		t.Fatalf("wrong signature: %v", err)
	}
	if _, err := c.DecryptMessage(sampleMsgSig, sampleMsgTS, sampleMsgNonce, []byte("<xml>")); !errors.Is(err, ErrBadXML) {
		t.Fatalf("truncated body: %v", err)
	}
	// A well-encrypted payload that is not a message.
	enc, sig, err := c.Encrypt([]byte("not xml"), "1", "n")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := EnvelopeXML("corp", enc, 1)
	if _, err := c.DecryptMessage(sig, "1", "n", body); !errors.Is(err, ErrBadXML) {
		t.Fatalf("inner not xml: %v", err)
	}
}

func TestDecryptMessageAgentIDFromEnvelope(t *testing.T) {
	c := sampleCrypto(t)
	inner := []byte(`<xml><FromUserName>bob</FromUserName><MsgType>event</MsgType><Event>enter_agent</Event><CreateTime>5</CreateTime></xml>`)
	enc, sig, err := c.Encrypt(inner, "1", "n")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := EnvelopeXML("corp", enc, 77)
	m, err := c.DecryptMessage(sig, "1", "n", body)
	if err != nil {
		t.Fatalf("DecryptMessage: %v", err)
	}
	if m.AgentID != 77 {
		t.Fatalf("AgentID = %d, want 77", m.AgentID)
	}
	if got, want := m.DedupKey(), "evt:bob:5:enter_agent"; got != want {
		t.Fatalf("DedupKey = %q, want %q", got, want)
	}
}

func TestDedupKey(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{Message{MsgID: "42", FromUserName: "a", CreateTime: 1}, "msg:42"},
		{Message{FromUserName: "a", CreateTime: 1, Event: "click"}, "evt:a:1:click"},
		{Message{FromUserName: "a", CreateTime: 1}, "evt:a:1:"},
	}
	for _, tt := range tests {
		if got := tt.m.DedupKey(); got != tt.want {
			t.Errorf("DedupKey(%+v) = %q, want %q", tt.m, got, tt.want)
		}
	}
	a := Message{FromUserName: "a", CreateTime: 1, Event: "click"}
	b := Message{FromUserName: "a", CreateTime: 1, Event: "enter_agent"}
	if a.DedupKey() == b.DedupKey() {
		t.Fatal("different events in the same second share a key")
	}
}

func TestReadBody(t *testing.T) {
	b, err := ReadBody(bytes.NewReader(make([]byte, MaxBodyBytes)))
	if err != nil || len(b) != MaxBodyBytes {
		t.Fatalf("ReadBody(limit) = %d bytes, %v", len(b), err)
	}
	if _, err := ReadBody(bytes.NewReader(make([]byte, MaxBodyBytes+1))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadBody(limit+1) = %v, want ErrTooLarge", err)
	}
}
