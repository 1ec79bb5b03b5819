package wecom

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Article is one card of a news message; SendLink sends a single one.
type Article struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url"`
	PicURL      string `json:"picurl,omitempty"`
}

// News message limits.
const (
	maxArticles        = 8
	maxArticleTitle    = 128
	maxArticleDescribe = 512
)

type textBody struct {
	Content string `json:"content"`
}

type mediaBody struct {
	MediaID     string `json:"media_id"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

type newsBody struct {
	Articles []Article `json:"articles"`
}

// sendRequest is the message/send body. Its JSON encoding is deterministic
// (struct order, no maps): the same message with the same options encodes
// to the same bytes, which WeCom's duplicate check compares.
type sendRequest struct {
	ToUser   string     `json:"touser"`
	MsgType  string     `json:"msgtype"`
	AgentID  int64      `json:"agentid"`
	Text     *textBody  `json:"text,omitempty"`
	Markdown *textBody  `json:"markdown,omitempty"`
	Image    *mediaBody `json:"image,omitempty"`
	Voice    *mediaBody `json:"voice,omitempty"`
	Video    *mediaBody `json:"video,omitempty"`
	File     *mediaBody `json:"file,omitempty"`
	News     *newsBody  `json:"news,omitempty"`
	// Omitted when zero: a message without the duplicate check is encoded
	// as it always was.
	EnableDuplicateCheck   int   `json:"enable_duplicate_check,omitempty"`
	DuplicateCheckInterval int64 `json:"duplicate_check_interval,omitempty"`
}

// MaxDuplicateCheck is the longest duplicate_check_interval WeCom accepts
// (documented: at most 4 hours); DefaultDuplicateCheck is what WeCom uses
// when the interval is not given (1800 s).
const (
	MaxDuplicateCheck     = 4 * time.Hour
	DefaultDuplicateCheck = 30 * time.Minute
)

// SendOption adjusts one message/send request.
type SendOption func(*sendRequest)

// DuplicateCheck turns on WeCom's duplicate check for the message
// (enable_duplicate_check=1, duplicate_check_interval=interval): WeCom
// does not deliver a request whose JSON is the same as one it accepted
// within the interval. Same JSON means the same recipient, application,
// type, content and the same two check fields, so every attempt of one
// message must use the same interval. The interval is rounded up to whole
// seconds and capped at MaxDuplicateCheck; zero or less sends no check.
func DuplicateCheck(interval time.Duration) SendOption {
	return func(r *sendRequest) {
		if interval <= 0 {
			r.EnableDuplicateCheck, r.DuplicateCheckInterval = 0, 0
			return
		}
		sec := int64((min(interval, MaxDuplicateCheck) + time.Second - 1) / time.Second)
		r.EnableDuplicateCheck, r.DuplicateCheckInterval = 1, sec
	}
}

type sendAnswer struct {
	apiStatus
	InvalidUser string `json:"invaliduser"`
	MsgID       string `json:"msgid"`
}

// SendText sends a text message of at most MaxTextBytes bytes (use Split).
func (c *Client) SendText(ctx context.Context, toUser, text string, opts ...SendOption) error {
	if err := checkText("send text", text); err != nil {
		return err
	}
	return c.send(ctx, "send text", sendRequest{ToUser: toUser, MsgType: "text", Text: &textBody{Content: text}}, opts)
}

// SendMarkdown sends a markdown message of at most MaxTextBytes bytes.
func (c *Client) SendMarkdown(ctx context.Context, toUser, text string, opts ...SendOption) error {
	if err := checkText("send markdown", text); err != nil {
		return err
	}
	return c.send(ctx, "send markdown", sendRequest{ToUser: toUser, MsgType: "markdown", Markdown: &textBody{Content: text}}, opts)
}

// SendMedia sends uploaded media: kind is image, voice, file or video.
func (c *Client) SendMedia(ctx context.Context, toUser, kind, mediaID string, opts ...SendOption) error {
	return c.sendMedia(ctx, toUser, kind, mediaID, "", "", opts)
}

// SendVideo sends an uploaded video with a title and description.
func (c *Client) SendVideo(ctx context.Context, toUser, mediaID, title, description string, opts ...SendOption) error {
	return c.sendMedia(ctx, toUser, MediaVideo, mediaID, title, description, opts)
}

func (c *Client) sendMedia(ctx context.Context, toUser, kind, mediaID, title, description string, opts []SendOption) error {
	op := "send " + kind
	if mediaID == "" {
		return fmt.Errorf("wecom: %s: empty media id", op)
	}
	req := sendRequest{ToUser: toUser, MsgType: kind}
	body := &mediaBody{MediaID: mediaID}
	switch kind {
	case MediaImage:
		req.Image = body
	case MediaVoice:
		req.Voice = body
	case MediaFile:
		req.File = body
	case MediaVideo:
		body.Title, body.Description = title, description
		req.Video = body
	default:
		return fmt.Errorf("wecom: send media: unknown kind %q (want image, voice, video or file)", kind)
	}
	return c.send(ctx, op, req, opts)
}

// SendNews sends 1 to 8 link cards.
func (c *Client) SendNews(ctx context.Context, toUser string, articles ...Article) error {
	return c.SendNewsWith(ctx, toUser, articles, nil)
}

// SendNewsWith sends 1 to 8 link cards with options.
func (c *Client) SendNewsWith(ctx context.Context, toUser string, articles []Article, opts []SendOption) error {
	const op = "send news"
	if len(articles) == 0 || len(articles) > maxArticles {
		return fmt.Errorf("wecom: %s: %d articles, want 1 to %d", op, len(articles), maxArticles)
	}
	for i, a := range articles {
		switch {
		case a.Title == "" || a.URL == "":
			return fmt.Errorf("wecom: %s: article %d: title and url are required", op, i)
		case len(a.Title) > maxArticleTitle:
			return fmt.Errorf("wecom: %s: article %d: title over %d bytes: %w", op, i, maxArticleTitle, ErrContentTooLong)
		case len(a.Description) > maxArticleDescribe:
			return fmt.Errorf("wecom: %s: article %d: description over %d bytes: %w", op, i, maxArticleDescribe, ErrContentTooLong)
		}
	}
	return c.send(ctx, op, sendRequest{ToUser: toUser, MsgType: "news", News: &newsBody{Articles: articles}}, opts)
}

// SendLink sends one link card.
func (c *Client) SendLink(ctx context.Context, toUser, title, description, link, picURL string, opts ...SendOption) error {
	return c.SendNewsWith(ctx, toUser, []Article{{Title: title, Description: description, URL: link, PicURL: picURL}}, opts)
}

func (c *Client) send(ctx context.Context, op string, req sendRequest, opts []SendOption) error {
	if req.ToUser == "" {
		return fmt.Errorf("wecom: %s: empty recipient", op)
	}
	for _, o := range opts {
		if o != nil {
			o(&req)
		}
	}
	req.AgentID = c.AgentID
	ans, err := postJSON[sendAnswer](ctx, c, op, "/cgi-bin/message/send", req)
	if err != nil {
		return err
	}
	if ans.InvalidUser != "" {
		return fmt.Errorf("wecom: %s: %q: %w", op, ans.InvalidUser, ErrInvalidUser)
	}
	return nil
}

func checkText(op, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("wecom: %s: empty content", op)
	}
	if len(text) > MaxTextBytes {
		return fmt.Errorf("wecom: %s: %d bytes, limit %d: %w", op, len(text), MaxTextBytes, ErrContentTooLong)
	}
	return nil
}
