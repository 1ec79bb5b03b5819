package wecomtest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"agent/pkg/wecom"
)

// CallbackBody encrypts msg as WeCom would post it: the query (msg_signature,
// timestamp, nonce) and the envelope XML body.
func CallbackBody(c *wecom.Crypto, msg *wecom.Message, timestamp, nonce string) (url.Values, []byte, error) {
	if c == nil || msg == nil {
		return nil, nil, errors.New("wecomtest: callback body: nil crypto or message")
	}
	inner, err := msg.XML()
	if err != nil {
		return nil, nil, fmt.Errorf("wecomtest: callback body: %w", err)
	}
	enc, sig, err := c.Encrypt(inner, timestamp, nonce)
	if err != nil {
		return nil, nil, fmt.Errorf("wecomtest: callback body: %w", err)
	}
	body, err := wecom.EnvelopeXML(msg.ToUserName, enc, msg.AgentID)
	if err != nil {
		return nil, nil, fmt.Errorf("wecomtest: callback body: %w", err)
	}
	q := url.Values{"msg_signature": {sig}, "timestamp": {timestamp}, "nonce": {nonce}}
	return q, body, nil
}

// CallbackRequest builds the POST WeCom sends to target (the callback URL)
// for msg.
func CallbackRequest(c *wecom.Crypto, target string, msg *wecom.Message, timestamp, nonce string) (*http.Request, error) {
	q, body, err := CallbackBody(c, msg, timestamp, nonce)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, target+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("wecomtest: callback request: %w", err)
	}
	req.Header.Set("Content-Type", "text/xml")
	return req, nil
}

// VerifyRequest builds the GET URL verification WeCom sends to target,
// with echo encrypted as echostr. With rawPlus the echostr is put in the
// query without percent-encoding, '+' and all, as WeCom has been seen to do.
func VerifyRequest(c *wecom.Crypto, target, echo, timestamp, nonce string, rawPlus bool) (*http.Request, error) {
	if c == nil {
		return nil, errors.New("wecomtest: verify request: nil crypto")
	}
	enc, sig, err := c.Encrypt([]byte(echo), timestamp, nonce)
	if err != nil {
		return nil, fmt.Errorf("wecomtest: verify request: %w", err)
	}
	q := url.Values{"msg_signature": {sig}, "timestamp": {timestamp}, "nonce": {nonce}}
	raw := q.Encode() + "&echostr="
	if rawPlus {
		raw += enc
	} else {
		raw += url.QueryEscape(enc)
	}
	req, err := http.NewRequest(http.MethodGet, target+"?"+raw, nil)
	if err != nil {
		return nil, fmt.Errorf("wecomtest: verify request: %w", err)
	}
	return req, nil
}
