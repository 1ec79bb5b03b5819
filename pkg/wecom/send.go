package wecom

import (
	"context"
	"fmt"
	"strings"
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

// sendRequest is the message/send body.
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
}

type sendAnswer struct {
	apiStatus
	InvalidUser string `json:"invaliduser"`
	MsgID       string `json:"msgid"`
}

// SendText sends a text message of at most MaxTextBytes bytes (use Split).
func (c *Client) SendText(ctx context.Context, toUser, text string) error {
	if err := checkText("send text", text); err != nil {
		return err
	}
	return c.send(ctx, "send text", sendRequest{ToUser: toUser, MsgType: "text", Text: &textBody{Content: text}})
}

// SendMarkdown sends a markdown message of at most MaxTextBytes bytes.
func (c *Client) SendMarkdown(ctx context.Context, toUser, text string) error {
	if err := checkText("send markdown", text); err != nil {
		return err
	}
	return c.send(ctx, "send markdown", sendRequest{ToUser: toUser, MsgType: "markdown", Markdown: &textBody{Content: text}})
}

// SendMedia sends uploaded media: kind is image, voice, file or video.
func (c *Client) SendMedia(ctx context.Context, toUser, kind, mediaID string) error {
	return c.sendMedia(ctx, toUser, kind, mediaID, "", "")
}

// SendVideo sends an uploaded video with a title and description.
func (c *Client) SendVideo(ctx context.Context, toUser, mediaID, title, description string) error {
	return c.sendMedia(ctx, toUser, MediaVideo, mediaID, title, description)
}

func (c *Client) sendMedia(ctx context.Context, toUser, kind, mediaID, title, description string) error {
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
	return c.send(ctx, op, req)
}

// SendNews sends 1 to 8 link cards.
func (c *Client) SendNews(ctx context.Context, toUser string, articles ...Article) error {
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
	return c.send(ctx, op, sendRequest{ToUser: toUser, MsgType: "news", News: &newsBody{Articles: articles}})
}

// SendLink sends one link card.
func (c *Client) SendLink(ctx context.Context, toUser, title, description, link, picURL string) error {
	return c.SendNews(ctx, toUser, Article{Title: title, Description: description, URL: link, PicURL: picURL})
}

func (c *Client) send(ctx context.Context, op string, req sendRequest) error {
	if req.ToUser == "" {
		return fmt.Errorf("wecom: %s: empty recipient", op)
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
