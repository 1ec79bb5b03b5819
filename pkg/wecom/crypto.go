// Package wecom implements the WeChat Work (WeCom) protocol pieces the daemon
// needs: callback crypto (signature, AES-256-CBC envelope), callback message
// parsing, reply splitting, and a client for the active API (access token,
// message/send, media upload and download). It depends on the standard
// library only; wecomtest holds a fake API server for tests.
package wecom

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"agent/pkg/clip"
)

// Sentinel errors of the callback crypto. Callers answer ErrSignature and
// ErrTimestamp with 403; the others mean a malformed or foreign message.
var (
	ErrSignature     = errors.New("signature mismatch")
	ErrBadCiphertext = errors.New("bad ciphertext")
	ErrReceiveID     = errors.New("receive id mismatch")
	ErrTimestamp     = errors.New("timestamp out of range")
	ErrBadKey        = errors.New("bad EncodingAESKey")
)

const (
	// encodingAESKeyLen is the length of the EncodingAESKey set in the
	// WeCom admin console: 43 base64 characters without the trailing '='.
	encodingAESKeyLen = 43
	// padBlock is the PKCS#7 block size WeCom uses (32, not AES's 16).
	padBlock = 32
	// randPrefix is the number of random bytes before the length field.
	randPrefix = 16
	// maxEncrypted bounds the base64 text Decrypt accepts; a callback
	// body is at most MaxBodyBytes, so nothing legitimate is longer.
	maxEncrypted = 2 * MaxBodyBytes
)

// Crypto signs, verifies, encrypts and decrypts WeCom callback payloads
// for one application. It is safe for concurrent use.
type Crypto struct {
	token     string
	receiveID string
	block     cipher.Block
	iv        []byte
	rand      io.Reader
}

// NewCrypto returns the callback crypto for an application. token and
// encodingAESKey come from the application's "receive messages" settings;
// receiveID is the corp id (for a self-built application).
func NewCrypto(token, encodingAESKey, receiveID string) (*Crypto, error) {
	const op = "wecom: new crypto"
	if token == "" {
		return nil, fmt.Errorf("%s: empty token", op)
	}
	if receiveID == "" {
		return nil, fmt.Errorf("%s: empty receive id (corp id)", op)
	}
	if len(encodingAESKey) != encodingAESKeyLen {
		return nil, fmt.Errorf("%s: EncodingAESKey has %d characters, want %d: %w",
			op, len(encodingAESKey), encodingAESKeyLen, ErrBadKey)
	}
	key, err := base64.StdEncoding.DecodeString(encodingAESKey + "=")
	if err != nil {
		return nil, fmt.Errorf("%s: EncodingAESKey is not base64: %w", op, ErrBadKey)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%s: EncodingAESKey decodes to %d bytes, want 32: %w", op, len(key), ErrBadKey)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &Crypto{
		token:     token,
		receiveID: receiveID,
		block:     block,
		iv:        bytes.Clone(key[:aes.BlockSize]),
		rand:      rand.Reader,
	}, nil
}

// Signature is the SHA1 hex digest of the lexically sorted concatenation of
// token, timestamp, nonce and the encrypted text.
func (c *Crypto) Signature(timestamp, nonce, encrypted string) string {
	parts := []string{c.token, timestamp, nonce, encrypted}
	sort.Strings(parts)
	sum := sha1.Sum([]byte(strings.Join(parts, "")))
	return hex.EncodeToString(sum[:])
}

// VerifyURL answers the GET URL verification: it checks the signature and
// returns the decrypted echostr, to be written back as the bare body.
//
// Go's query parser turns a raw '+' into ' '; base64 never contains a
// space, so spaces in echostr are turned back into '+' first.
func (c *Crypto) VerifyURL(msgSignature, timestamp, nonce, echostr string) ([]byte, error) {
	echostr = strings.ReplaceAll(echostr, " ", "+")
	plain, err := c.decrypt(msgSignature, timestamp, nonce, echostr)
	if err != nil {
		return nil, fmt.Errorf("wecom: verify url: %w", err)
	}
	return plain, nil
}

// Decrypt checks the signature of an encrypted callback payload (before any
// other work, in constant time) and returns the decrypted message.
func (c *Crypto) Decrypt(msgSignature, timestamp, nonce, encrypted string) ([]byte, error) {
	plain, err := c.decrypt(msgSignature, timestamp, nonce, encrypted)
	if err != nil {
		return nil, fmt.Errorf("wecom: decrypt: %w", err)
	}
	return plain, nil
}

func (c *Crypto) decrypt(msgSignature, timestamp, nonce, encrypted string) ([]byte, error) {
	want := c.Signature(timestamp, nonce, encrypted)
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(msgSignature)), []byte(want)) != 1 {
		return nil, ErrSignature
	}
	if len(encrypted) > maxEncrypted {
		return nil, fmt.Errorf("%d base64 characters, limit %d: %w", len(encrypted), maxEncrypted, ErrBadCiphertext)
	}
	ct, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, fmt.Errorf("base64: %v: %w", err, ErrBadCiphertext)
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("ciphertext length %d is not a positive multiple of %d: %w",
			len(ct), aes.BlockSize, ErrBadCiphertext)
	}
	plain := make([]byte, len(ct))
	cipher.NewCBCDecrypter(c.block, c.iv).CryptBlocks(plain, ct)
	plain, err = unpad(plain)
	if err != nil {
		return nil, err
	}
	if len(plain) < randPrefix+4 {
		return nil, fmt.Errorf("plaintext of %d bytes is shorter than its header: %w", len(plain), ErrBadCiphertext)
	}
	body := plain[randPrefix+4:]
	n := binary.BigEndian.Uint32(plain[randPrefix : randPrefix+4])
	if uint64(n) > uint64(len(body)) {
		return nil, fmt.Errorf("message length %d exceeds the %d bytes left: %w", n, len(body), ErrBadCiphertext)
	}
	msg, rid := body[:n], body[n:]
	if string(rid) != c.receiveID {
		return nil, fmt.Errorf("got %q: %w", clip.String(string(rid), 64), ErrReceiveID)
	}
	return bytes.Clone(msg), nil
}

// unpad removes PKCS#7 padding with WeCom's 32-byte block, checking every
// pad byte.
func unpad(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("padding: empty: %w", ErrBadCiphertext)
	}
	p := int(b[len(b)-1])
	if p < 1 || p > padBlock || p > len(b) {
		return nil, fmt.Errorf("padding: bad pad length %d: %w", p, ErrBadCiphertext)
	}
	var bad byte
	for _, x := range b[len(b)-p:] {
		bad |= x ^ byte(p)
	}
	if bad != 0 {
		return nil, fmt.Errorf("padding: inconsistent pad bytes: %w", ErrBadCiphertext)
	}
	return b[:len(b)-p], nil
}

// pad appends PKCS#7 padding with WeCom's 32-byte block (1..32 bytes).
func pad(b []byte) []byte {
	p := padBlock - len(b)%padBlock
	return append(b, bytes.Repeat([]byte{byte(p)}, p)...)
}

// Encrypt builds an encrypted payload (16 random bytes, big-endian length,
// plaintext, receive id; padded; AES-256-CBC; base64) and its signature.
func (c *Crypto) Encrypt(plaintext []byte, timestamp, nonce string) (encrypted, signature string, err error) {
	const op = "wecom: encrypt"
	if uint64(len(plaintext)) > uint64(^uint32(0)) {
		return "", "", fmt.Errorf("%s: plaintext of %d bytes is too long", op, len(plaintext))
	}
	buf := make([]byte, randPrefix+4, randPrefix+4+len(plaintext)+len(c.receiveID)+padBlock)
	if _, err := io.ReadFull(c.rand, buf[:randPrefix]); err != nil {
		return "", "", fmt.Errorf("%s: random prefix: %w", op, err)
	}
	binary.BigEndian.PutUint32(buf[randPrefix:], uint32(len(plaintext)))
	buf = append(buf, plaintext...)
	buf = append(buf, c.receiveID...)
	buf = pad(buf)
	cipher.NewCBCEncrypter(c.block, c.iv).CryptBlocks(buf, buf)
	encrypted = base64.StdEncoding.EncodeToString(buf)
	return encrypted, c.Signature(timestamp, nonce, encrypted), nil
}

// replyEnvelope is the passive-reply XML WeCom expects.
type replyEnvelope struct {
	XMLName      xml.Name `xml:"xml"`
	Encrypt      cdata    `xml:"Encrypt"`
	MsgSignature cdata    `xml:"MsgSignature"`
	TimeStamp    string   `xml:"TimeStamp"`
	Nonce        cdata    `xml:"Nonce"`
}

// cdata is element text written as CDATA.
type cdata struct {
	Text string `xml:",cdata"`
}

// ReplyXML encrypts plaintext (an inner message XML) and wraps it in the
// passive-reply envelope <xml><Encrypt/><MsgSignature/><TimeStamp/><Nonce/></xml>.
func (c *Crypto) ReplyXML(plaintext []byte, timestamp, nonce string) ([]byte, error) {
	enc, sig, err := c.Encrypt(plaintext, timestamp, nonce)
	if err != nil {
		return nil, err
	}
	out, err := xml.Marshal(replyEnvelope{Encrypt: cdata{enc}, MsgSignature: cdata{sig}, TimeStamp: timestamp, Nonce: cdata{nonce}})
	if err != nil {
		return nil, fmt.Errorf("wecom: reply xml: %w", err)
	}
	return out, nil
}

// CheckTimestamp rejects a callback whose timestamp (decimal Unix seconds)
// is more than maxSkew away from now, in either direction.
func CheckTimestamp(ts string, now time.Time, maxSkew time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("wecom: check timestamp: %q is not Unix seconds: %w", clip.String(ts, 32), ErrTimestamp)
	}
	// Compare in seconds so absurd values cannot overflow a Duration.
	limit := max(int64(maxSkew/time.Second), 0)
	lo, hi := now.Unix()-limit, now.Unix()+limit
	if sec < lo || sec > hi {
		return fmt.Errorf("wecom: check timestamp: %d is more than %s from %d: %w", sec, maxSkew, now.Unix(), ErrTimestamp)
	}
	return nil
}

// Query holds the callback query parameters.
type Query struct {
	MsgSignature string
	Timestamp    string
	Nonce        string
	EchoStr      string
}

// ParseQuery parses a callback's raw query string (URL.RawQuery) without
// turning '+' into ' ', so echostr arrives intact even when WeCom did not
// percent-encode it.
func ParseQuery(rawQuery string) (Query, error) {
	var q Query
	for kv := range strings.SplitSeq(rawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		val, err := url.PathUnescape(v)
		if err != nil {
			return Query{}, fmt.Errorf("wecom: parse query: %s: %w", clip.String(k, 32), err)
		}
		switch k {
		case "msg_signature":
			q.MsgSignature = val
		case "timestamp":
			q.Timestamp = val
		case "nonce":
			q.Nonce = val
		case "echostr":
			q.EchoStr = val
		}
	}
	return q, nil
}
