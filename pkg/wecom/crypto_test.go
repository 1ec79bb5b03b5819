package wecom

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// The official sample vector (Tencent's Go callback crypto sample).
const (
	sampleToken     = "QDG6eK"
	sampleKey       = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	sampleReceiveID = "wx5823bf96d3bd56c7"

	sampleVerifySig   = "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
	sampleVerifyTS    = "1409659589"
	sampleVerifyNonce = "263014780"
	sampleEchoStr     = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
	sampleEchoPlain   = "1616140317555161061"

	sampleMsgSig   = "477715d11cdb4164915debcba66cb864d751f3e6"
	sampleMsgTS    = "1409659813"
	sampleMsgNonce = "1372623149"
	sampleEncrypt  = "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
	sampleAgentID  = 218
	sampleFrom     = "mycreate"
	sampleMsgID    = "4561255354251345929"
)

func sampleCrypto(t testing.TB) *Crypto {
	t.Helper()
	c, err := NewCrypto(sampleToken, sampleKey, sampleReceiveID)
	if err != nil {
		t.Fatalf("NewCrypto: %v", err)
	}
	return c
}

func sampleBody() []byte {
	return []byte("<xml><ToUserName><![CDATA[" + sampleReceiveID + "]]></ToUserName><Encrypt><![CDATA[" +
		sampleEncrypt + "]]></Encrypt><AgentID><![CDATA[218]]></AgentID></xml>")
}

func TestGoldenVerifyURL(t *testing.T) {
	c := sampleCrypto(t)
	if got := c.Signature(sampleVerifyTS, sampleVerifyNonce, sampleEchoStr); got != sampleVerifySig {
		t.Fatalf("Signature = %s, want %s", got, sampleVerifySig)
	}
	got, err := c.VerifyURL(sampleVerifySig, sampleVerifyTS, sampleVerifyNonce, sampleEchoStr)
	if err != nil {
		t.Fatalf("VerifyURL: %v", err)
	}
	if string(got) != sampleEchoPlain {
		t.Fatalf("VerifyURL = %q, want %q", got, sampleEchoPlain)
	}
	// The '+' pitfall: a query parser turned '+' into ' '.
	mangled := strings.ReplaceAll(sampleEchoStr, "+", " ")
	if got, err := c.VerifyURL(sampleVerifySig, sampleVerifyTS, sampleVerifyNonce, mangled); err != nil || string(got) != sampleEchoPlain {
		t.Fatalf("VerifyURL(mangled) = %q, %v", got, err)
	}
	// Upper-case hex signatures are accepted too.
	if _, err := c.VerifyURL(strings.ToUpper(sampleVerifySig), sampleVerifyTS, sampleVerifyNonce, sampleEchoStr); err != nil {
		t.Fatalf("VerifyURL(upper-case signature): %v", err)
	}
}

func TestGoldenDecryptMessage(t *testing.T) {
	c := sampleCrypto(t)
	if got := c.Signature(sampleMsgTS, sampleMsgNonce, sampleEncrypt); got != sampleMsgSig {
		t.Fatalf("Signature = %s, want %s", got, sampleMsgSig)
	}
	m, err := c.DecryptMessage(sampleMsgSig, sampleMsgTS, sampleMsgNonce, sampleBody())
	if err != nil {
		t.Fatalf("DecryptMessage: %v", err)
	}
	if m.MsgType != MsgText || m.Content != "hello" || m.FromUserName != sampleFrom ||
		m.MsgID != sampleMsgID || m.AgentID != sampleAgentID || m.ToUserName != sampleReceiveID {
		t.Fatalf("message = %+v", m)
	}
	if got, want := m.DedupKey(), "msg:"+sampleMsgID; got != want {
		t.Fatalf("DedupKey = %q, want %q", got, want)
	}
}

func TestNewCryptoErrors(t *testing.T) {
	tests := []struct {
		name, token, key, rid string
		bad                   bool // wraps ErrBadKey
	}{
		{"short key", "t", sampleKey[:42], "r", true},
		{"long key", "t", sampleKey + "A", "r", true},
		{"not base64", "t", "!" + sampleKey[1:], "r", true},
		{"padded", "t", sampleKey[:42] + "=", "r", true},
		{"empty token", "", sampleKey, "r", false},
		{"empty receive id", "t", sampleKey, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCrypto(tt.token, tt.key, tt.rid)
			if err == nil {
				t.Fatal("got nil error")
			}
			if got := errors.Is(err, ErrBadKey); got != tt.bad {
				t.Fatalf("errors.Is(%v, ErrBadKey) = %v, want %v", err, got, tt.bad)
			}
		})
	}
}

func TestEncryptRoundTrip(t *testing.T) {
	c := sampleCrypto(t)
	for _, n := range []int{0, 1, 11, 12, 13, 31, 32, 33, 100, 4096} {
		msg := bytes.Repeat([]byte{'x'}, n)
		enc, sig, err := c.Encrypt(msg, "1700000000", "nonce")
		if err != nil {
			t.Fatalf("Encrypt(%d): %v", n, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(enc)
		if len(raw)%padBlock != 0 {
			t.Fatalf("ciphertext of %d bytes is not padded to %d", len(raw), padBlock)
		}
		got, err := c.Decrypt(sig, "1700000000", "nonce", enc)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("Decrypt(Encrypt(%d bytes)) = %d bytes, %v", n, len(got), err)
		}
	}
}

func TestReplyXML(t *testing.T) {
	c := sampleCrypto(t)
	out, err := c.ReplyXML([]byte("<xml><Content>hi</Content></xml>"), "1700000000", "n]]>x")
	if err != nil {
		t.Fatalf("ReplyXML: %v", err)
	}
	var env replyEnvelope
	if err := decodeXML(out, &env); err != nil {
		t.Fatalf("decode reply %s: %v", out, err)
	}
	if env.Nonce.Text != "n]]>x" || env.TimeStamp != "1700000000" || !bytes.Contains(out, []byte("<Encrypt><![CDATA[")) {
		t.Fatalf("reply envelope = %s", out)
	}
	got, err := c.Decrypt(env.MsgSignature.Text, env.TimeStamp, env.Nonce.Text, env.Encrypt.Text)
	if err != nil || string(got) != "<xml><Content>hi</Content></xml>" {
		t.Fatalf("Decrypt(reply) = %q, %v", got, err)
	}
}

// rawCiphertext encrypts an arbitrary already-padded plaintext with c's key,
// so tests can produce bad padding, lengths and receive ids.
func rawCiphertext(c *Crypto, plain []byte) string {
	buf := bytes.Clone(plain)
	if r := len(buf) % aes.BlockSize; r != 0 {
		buf = append(buf, make([]byte, aes.BlockSize-r)...)
	}
	cipher.NewCBCEncrypter(c.block, c.iv).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf)
}

// frame builds 16 random bytes + length + msg + rid, padded by pad.
func frame(length uint32, msg, rid string) []byte {
	b := make([]byte, randPrefix+4)
	binary.BigEndian.PutUint32(b[randPrefix:], length)
	b = append(b, msg...)
	return append(b, rid...)
}

func TestDecryptErrors(t *testing.T) {
	c := sampleCrypto(t)
	const ts, nonce = "1700000000", "n"
	goodPad := func(b []byte) []byte { return pad(bytes.Clone(b)) }
	tests := []struct {
		name      string
		encrypted string
		sig       string // "" = correct signature
		want      error
	}{
		{"wrong signature", sampleEncrypt, "0000000000000000000000000000000000000000", ErrSignature},
		{"empty signature", sampleEncrypt, "-", ErrSignature},
		// Signature is checked first: garbage with a wrong signature is ErrSignature.
		{"bad base64 wrong signature", "!!!", "0000000000000000000000000000000000000000", ErrSignature},
		{"bad base64", "!!!not base64", "", ErrBadCiphertext},
		{"empty", "", "", ErrBadCiphertext},
		{"not block multiple", base64.StdEncoding.EncodeToString(make([]byte, 17)), "", ErrBadCiphertext},
		{"pad zero", rawCiphertext(c, append(frame(2, "hi", sampleReceiveID), make([]byte, 6)...)), "", ErrBadCiphertext},
		{"pad too big", rawCiphertext(c, append(frame(2, "hi", sampleReceiveID), bytes.Repeat([]byte{33}, 28)...)), "", ErrBadCiphertext},
		{"pad inconsistent", rawCiphertext(c, append(frame(2, "hi", sampleReceiveID), append(bytes.Repeat([]byte{7}, 27), 28)...)), "", ErrBadCiphertext},
		{"short plaintext", rawCiphertext(c, goodPad([]byte("short"))), "", ErrBadCiphertext},
		{"length too large", rawCiphertext(c, goodPad(frame(1000, "hi", sampleReceiveID))), "", ErrBadCiphertext},
		{"length max uint32", rawCiphertext(c, goodPad(frame(^uint32(0), "hi", sampleReceiveID))), "", ErrBadCiphertext},
		{"wrong receive id", rawCiphertext(c, goodPad(frame(2, "hi", "wxOTHER"))), "", ErrReceiveID},
		{"empty receive id", rawCiphertext(c, goodPad(frame(2, "hi", ""))), "", ErrReceiveID},
		{"length eats receive id", rawCiphertext(c, goodPad(frame(2+uint32(len(sampleReceiveID)), "hi", sampleReceiveID))), "", ErrReceiveID},
		{"too long", strings.Repeat("A", maxEncrypted+4), "", ErrBadCiphertext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig := tt.sig
			if sig == "" {
				sig = c.Signature(ts, nonce, tt.encrypted)
			}
			got, err := c.Decrypt(sig, ts, nonce, tt.encrypted)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decrypt = %q, %v; want %v", got, err, tt.want)
			}
		})
	}
	// Sanity: the frame helper produces a valid message.
	enc := rawCiphertext(c, goodPad(frame(2, "hi", sampleReceiveID)))
	if got, err := c.Decrypt(c.Signature(ts, nonce, enc), ts, nonce, enc); err != nil || string(got) != "hi" {
		t.Fatalf("Decrypt(valid frame) = %q, %v", got, err)
	}
}

func TestCheckTimestamp(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		ts   string
		skew time.Duration
		ok   bool
	}{
		{"1700000000", time.Minute, true},
		{"1699999940", time.Minute, true},
		{"1700000060", time.Minute, true},
		{"1699999939", time.Minute, false},
		{"1700000061", time.Minute, false},
		{"", time.Minute, false},
		{"abc", time.Minute, false},
		{"1.7e9", time.Minute, false},
		{"-9223372036854775808", time.Minute, false},
		{"9223372036854775807", time.Minute, false},
		{"99999999999999999999", time.Minute, false},
		{"1700000000", -time.Second, true},
		{"1700000001", 0, false},
	}
	for _, tt := range tests {
		err := CheckTimestamp(tt.ts, now, tt.skew)
		if (err == nil) != tt.ok {
			t.Errorf("CheckTimestamp(%q, %s) = %v, want ok=%v", tt.ts, tt.skew, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrTimestamp) {
			t.Errorf("CheckTimestamp(%q) error %v does not wrap ErrTimestamp", tt.ts, err)
		}
	}
}

func TestParseQuery(t *testing.T) {
	raw := "msg_signature=" + sampleVerifySig + "&timestamp=" + sampleVerifyTS + "&nonce=" + sampleVerifyNonce +
		"&echostr=" + sampleEchoStr + "&extra=1&&novalue"
	q, err := ParseQuery(raw)
	if err != nil {
		t.Fatalf("ParseQuery: %v", err)
	}
	want := Query{MsgSignature: sampleVerifySig, Timestamp: sampleVerifyTS, Nonce: sampleVerifyNonce, EchoStr: sampleEchoStr}
	if q != want {
		t.Fatalf("ParseQuery = %+v, want %+v", q, want)
	}
	q, err = ParseQuery("echostr=a%2Bb%3D%3D")
	if err != nil || q.EchoStr != "a+b==" {
		t.Fatalf("ParseQuery(escaped) = %+v, %v", q, err)
	}
	if _, err := ParseQuery("echostr=%zz"); err == nil {
		t.Fatal("ParseQuery(bad escape) = nil error")
	}
}
