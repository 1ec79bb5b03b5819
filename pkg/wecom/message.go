package wecom

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxBodyBytes bounds a callback body and a decrypted inner message.
const MaxBodyBytes = 64 << 10

// maxXMLDepth bounds element nesting; WeCom messages are flat.
const maxXMLDepth = 8

// Sentinel errors of message parsing.
var (
	ErrTooLarge = errors.New("too large")
	ErrBadXML   = errors.New("malformed XML")
	ErrDTD      = errors.New("DOCTYPE/ENTITY declarations are not allowed")
)

// Message types of inbound messages. Others are returned as-is.
const (
	MsgText     = "text"
	MsgImage    = "image"
	MsgVoice    = "voice"
	MsgVideo    = "video"
	MsgFile     = "file"
	MsgLocation = "location"
	MsgLink     = "link"
	MsgEvent    = "event"
)

// Envelope is the outer XML of an encrypted callback body.
type Envelope struct {
	XMLName    xml.Name `xml:"xml"`
	ToUserName string   `xml:"ToUserName"`
	Encrypt    string   `xml:"Encrypt"`
	AgentID    string   `xml:"AgentID"`
}

// Message is a decrypted inbound message or event. Fields a type does not
// use are empty.
type Message struct {
	XMLName      xml.Name `xml:"xml"`
	ToUserName   string   `xml:"ToUserName"`
	FromUserName string   `xml:"FromUserName"`
	CreateTime   int64    `xml:"CreateTime"`
	MsgType      string   `xml:"MsgType"`
	Content      string   `xml:"Content,omitempty"`
	MsgID        string   `xml:"MsgId,omitempty"`
	ChatID       string   `xml:"ChatId,omitempty"` // group chat the message came from, if any
	PicURL       string   `xml:"PicUrl,omitempty"`
	MediaID      string   `xml:"MediaId,omitempty"`
	Format       string   `xml:"Format,omitempty"` // voice: amr or speex
	ThumbMediaID string   `xml:"ThumbMediaId,omitempty"`
	FileName     string   `xml:"FileName,omitempty"`
	// Location.
	LocationX string `xml:"Location_X,omitempty"`
	LocationY string `xml:"Location_Y,omitempty"`
	Scale     string `xml:"Scale,omitempty"`
	Label     string `xml:"Label,omitempty"`
	// Link.
	Title       string `xml:"Title,omitempty"`
	Description string `xml:"Description,omitempty"`
	URL         string `xml:"Url,omitempty"`
	// Event.
	Event    string `xml:"Event,omitempty"`
	EventKey string `xml:"EventKey,omitempty"`
	AgentID  int64  `xml:"AgentID,omitempty"`
}

// DedupKey identifies a message across WeCom's retries: the MsgId when
// present, otherwise (events) FromUserName, CreateTime and Event.
func (m *Message) DedupKey() string {
	if m.MsgID != "" {
		return "msg:" + m.MsgID
	}
	return "evt:" + m.FromUserName + ":" + strconv.FormatInt(m.CreateTime, 10) + ":" + m.Event
}

// XML encodes the message as WeCom's inner XML (tests, fake servers).
func (m *Message) XML() ([]byte, error) {
	out, err := xml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("wecom: encode message: %w", err)
	}
	return out, nil
}

// EnvelopeXML builds the outer XML of an encrypted callback body.
func EnvelopeXML(toUserName, encrypted string, agentID int64) ([]byte, error) {
	out, err := xml.Marshal(Envelope{ToUserName: toUserName, Encrypt: encrypted, AgentID: strconv.FormatInt(agentID, 10)})
	if err != nil {
		return nil, fmt.Errorf("wecom: encode envelope: %w", err)
	}
	return out, nil
}

// ReadBody reads a callback body of at most MaxBodyBytes.
func ReadBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wecom: read body: %w", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, fmt.Errorf("wecom: read body: over %d bytes: %w", MaxBodyBytes, ErrTooLarge)
	}
	return b, nil
}

// ParseEnvelope parses the outer XML of an encrypted callback body.
func ParseEnvelope(data []byte) (*Envelope, error) {
	var env Envelope
	if err := decodeXML(data, &env); err != nil {
		return nil, fmt.Errorf("wecom: parse envelope: %w", err)
	}
	if env.Encrypt == "" {
		return nil, fmt.Errorf("wecom: parse envelope: no Encrypt element: %w", ErrBadXML)
	}
	return &env, nil
}

// ParseMessage parses a decrypted inner message. An unknown MsgType is not
// an error; the caller decides what to ignore.
func ParseMessage(data []byte) (*Message, error) {
	var m Message
	if err := decodeXML(data, &m); err != nil {
		return nil, fmt.Errorf("wecom: parse message: %w", err)
	}
	if m.MsgType == "" {
		return nil, fmt.Errorf("wecom: parse message: no MsgType: %w", ErrBadXML)
	}
	if m.FromUserName == "" {
		return nil, fmt.Errorf("wecom: parse message: no FromUserName: %w", ErrBadXML)
	}
	return &m, nil
}

// DecryptMessage verifies and decrypts a POSTed callback body and parses the
// inner message. The envelope's AgentID fills in a message that lacks one.
func (c *Crypto) DecryptMessage(msgSignature, timestamp, nonce string, body []byte) (*Message, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	plain, err := c.Decrypt(msgSignature, timestamp, nonce, env.Encrypt)
	if err != nil {
		return nil, err
	}
	m, err := ParseMessage(plain)
	if err != nil {
		return nil, err
	}
	if m.AgentID == 0 {
		if id, err := strconv.ParseInt(env.AgentID, 10, 64); err == nil {
			m.AgentID = id
		}
	}
	return m, nil
}

// decodeXML decodes one root element, refusing oversized input, DTDs and
// deep nesting. encoding/xml does not expand custom entities anyway (an
// undefined &name; is a syntax error); the DTD is refused so the caller gets
// a clear error rather than a confusing one.
func decodeXML(data []byte, v any) error {
	if len(data) > MaxBodyBytes {
		return fmt.Errorf("%d bytes, limit %d: %w", len(data), MaxBodyBytes, ErrTooLarge)
	}
	g := &guard{d: xml.NewDecoder(bytes.NewReader(data))}
	g.d.Strict = true
	if err := xml.NewTokenDecoder(g).Decode(v); err != nil {
		if errors.Is(err, ErrDTD) || errors.Is(err, ErrBadXML) {
			return err
		}
		if err == io.EOF {
			return fmt.Errorf("empty document: %w", ErrBadXML)
		}
		return fmt.Errorf("%v: %w", err, ErrBadXML)
	}
	return nil
}

// guard is a TokenReader that rejects directives and deep nesting.
type guard struct {
	d     *xml.Decoder
	depth int
}

func (g *guard) Token() (xml.Token, error) {
	t, err := g.d.Token()
	if err != nil {
		return nil, err
	}
	switch t.(type) {
	case xml.Directive:
		return nil, ErrDTD
	case xml.StartElement:
		g.depth++
		if g.depth > maxXMLDepth {
			return nil, fmt.Errorf("nesting deeper than %d: %w", maxXMLDepth, ErrBadXML)
		}
	case xml.EndElement:
		g.depth--
	}
	return xml.CopyToken(t), nil
}
