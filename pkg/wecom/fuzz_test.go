package wecom

import (
	"bytes"
	"crypto/aes"
	"errors"
	"testing"
)

// FuzzDecrypt drives Decrypt down each path: mode 0 uses the fuzzed
// signature as is; mode 1 signs the fuzzed base64 text (base64, block and
// padding checks); mode 2 encrypts the fuzzed bytes as a raw padded frame
// (padding, length and receive id checks); mode 3 encrypts them as a valid
// message and parses it (XML path). Every outcome must be a value, never a
// panic, and failures must carry a sentinel.
func FuzzDecrypt(f *testing.F) {
	f.Add(uint8(0), sampleMsgSig, sampleMsgTS, sampleMsgNonce, sampleEncrypt, []byte(nil))
	f.Add(uint8(0), sampleVerifySig, sampleVerifyTS, sampleVerifyNonce, sampleEchoStr, []byte(nil))
	f.Add(uint8(1), "", "1", "n", "!!!!", []byte(nil))
	f.Add(uint8(1), "", "1", "n", "AAAAAAAAAAAAAAAAAAAAAA==", []byte(nil))
	f.Add(uint8(2), "", "1", "n", "", append(frame(2, "hi", sampleReceiveID), bytes.Repeat([]byte{10}, 10)...))
	f.Add(uint8(2), "", "1", "n", "", append(frame(^uint32(0), "hi", sampleReceiveID), 1))
	f.Add(uint8(3), "", "1", "n", "", []byte(`<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>x</Content></xml>`))
	f.Add(uint8(3), "", "1", "n", "", []byte(`<!DOCTYPE x [<!ENTITY a "b">]><xml>&a;</xml>`))
	c := sampleCrypto(f)
	f.Fuzz(func(t *testing.T, mode uint8, sig, ts, nonce, encrypted string, raw []byte) {
		switch mode % 4 {
		case 0:
		case 1:
			sig = c.Signature(ts, nonce, encrypted)
		case 2:
			if len(raw) > MaxBodyBytes {
				return
			}
			encrypted = rawCiphertext(c, raw)
			sig = c.Signature(ts, nonce, encrypted)
		case 3:
			if len(raw) > MaxBodyBytes {
				return
			}
			enc, s, err := c.Encrypt(raw, ts, nonce)
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			body, err := EnvelopeXML("corp", enc, 1)
			if err != nil {
				t.Fatalf("EnvelopeXML: %v", err)
			}
			m, err := c.DecryptMessage(s, ts, nonce, body)
			if err != nil {
				if errors.Is(err, ErrSignature) || errors.Is(err, ErrBadCiphertext) || errors.Is(err, ErrReceiveID) {
					t.Fatalf("valid encryption rejected by crypto: %v", err)
				}
				if !errors.Is(err, ErrBadXML) && !errors.Is(err, ErrDTD) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error without sentinel: %v", err)
				}
				return
			}
			if m.MsgType == "" || m.FromUserName == "" {
				t.Fatalf("accepted message without type or sender: %+v", m)
			}
			return
		}
		plain, err := c.Decrypt(sig, ts, nonce, encrypted)
		if err != nil {
			if !errors.Is(err, ErrSignature) && !errors.Is(err, ErrBadCiphertext) && !errors.Is(err, ErrReceiveID) {
				t.Fatalf("error without sentinel: %v", err)
			}
			return
		}
		if mode%4 == 2 && len(raw)%aes.BlockSize == 0 && len(plain) > len(raw) {
			t.Fatalf("plaintext longer than the frame")
		}
		// Anything that decrypts re-encrypts to the same plaintext.
		enc, s, err := c.Encrypt(plain, ts, nonce)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Decrypt(s, ts, nonce, enc)
		if err != nil || !bytes.Equal(again, plain) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseMessage feeds arbitrary bytes to both XML parsers.
func FuzzParseMessage(f *testing.F) {
	seeds := []string{
		`<xml><ToUserName><![CDATA[corp]]></ToUserName><FromUserName><![CDATA[alice]]></FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[hello]]></Content><MsgId>4561255354251345929</MsgId><AgentID>218</AgentID></xml>`,
		`<xml><FromUserName>a</FromUserName><MsgType>event</MsgType><Event>click</Event><EventKey>k</EventKey></xml>`,
		`<xml><FromUserName>a</FromUserName><MsgType>location</MsgType><Location_X>1.5</Location_X></xml>`,
		`<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><xml><Content>&lol2;</Content></xml>`,
		`<xml><FromUserName>a</FromUserName><MsgType>te`,
		`<xml><CreateTime>99999999999999999999999</CreateTime></xml>`,
		`<?xml version="1.0" encoding="GBK"?><xml/>`,
		`<xml xmlns:a="x"><a:MsgType>text</a:MsgType></xml>`,
		string(sampleBody()),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMessage(data)
		if err != nil {
			if !errors.Is(err, ErrBadXML) && !errors.Is(err, ErrDTD) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error without sentinel: %v", err)
			}
		} else {
			if m.MsgType == "" || m.FromUserName == "" {
				t.Fatalf("accepted message without type or sender: %+v", m)
			}
			_ = m.DedupKey()
			if _, err := m.XML(); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
		}
		if env, err := ParseEnvelope(data); err == nil && env.Encrypt == "" {
			t.Fatal("envelope without Encrypt accepted")
		}
	})
}
