package wecom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"agent/pkg/channel/upload"
	"agent/pkg/recipient"
	"agent/pkg/tools"
	"agent/pkg/turn"
	wx "agent/pkg/wecom"
)

// ToolDeps is what the media tools (send_image, send_file, send_video,
// send_link) need. Each func is looked up per call, so the tools may be
// registered before the channel starts.
type ToolDeps struct {
	// Open opens a regular file as the caller sees it: their own folder
	// or a common area (workspace.Spaces.Open); its errors are written for
	// the model.
	Open func(call tools.Call, path string) (*os.File, os.FileInfo, error)
	// Upload uploads temporary media (wecom.Client.UploadMedia).
	Upload func(ctx context.Context, kind, filename string, r io.Reader, size int64) (string, error)
	// Deliver queues a media message for a user, in order with their
	// text replies (Processor.Deliver).
	Deliver func(ctx context.Context, toUser string, m OutMedia) error
	// Recipients decides whom a call may send to (the user of the
	// conversation; owners any single user).
	Recipients recipient.Policy
}

type sendFileArgs struct {
	Path string `json:"path" desc:"file path relative to the workspace"`
	To   string `json:"to,omitempty" desc:"WeCom user id; empty = the user of this conversation"`
}

type sendVideoArgs struct {
	Path        string `json:"path" desc:"an .mp4 file relative to the workspace (at most 10 MB)"`
	Title       string `json:"title,omitempty" desc:"title shown with the video"`
	Description string `json:"description,omitempty" desc:"description shown with the video"`
	To          string `json:"to,omitempty" desc:"WeCom user id; empty = the user of this conversation"`
}

type sendLinkArgs struct {
	Title       string `json:"title" desc:"card title (at most 128 bytes)"`
	Description string `json:"description,omitempty" desc:"card text (at most 512 bytes)"`
	URL         string `json:"url" desc:"the http(s) address the card opens"`
	PicURL      string `json:"pic_url,omitempty" desc:"optional http(s) address of the card's picture"`
	To          string `json:"to,omitempty" desc:"WeCom user id; empty = the user of this conversation"`
}

// Link card limits (WeCom's news message).
const (
	maxLinkTitle       = 128
	maxLinkDescription = 512
	maxLinkURL         = 2048
)

// fileTool is send_image or send_file: a workspace file of kind kind.
func (d ToolDeps) fileTool(name, kind, description string) tools.Tool {
	return tools.Tool{
		Name:        name,
		Description: description,
		Schema:      tools.SchemaFor[sendFileArgs](),
		Profiles:    []string{Channel},
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			args, err := tools.Decode[sendFileArgs](call.Args)
			if err != nil {
				return "", err
			}
			return d.sendFile(ctx, call, kind, args.Path, args.To, "", "")
		},
	}
}

// MediaTools returns send_image, send_file, send_video and send_link, for
// the wecom profile only.
func MediaTools(d ToolDeps) []tools.Tool {
	wecomOnly := []string{Channel}
	return []tools.Tool{
		d.fileTool("send_image", wx.MediaImage,
			"Send a picture from the workspace (.jpg, .jpeg or .png, at most 10 MB) to the WeCom user of this conversation (or to another user). It arrives in order after your earlier messages."),
		d.fileTool("send_file", wx.MediaFile,
			"Send a file from the workspace (any type, 5 bytes to 20 MB) to the WeCom user of this conversation (or to another user). It arrives in order after your earlier messages."),
		{
			Name:        "send_video",
			Description: "Send an .mp4 video from the workspace (at most 10 MB) to the WeCom user of this conversation (or to another user), with an optional title and description.",
			Schema:      tools.SchemaFor[sendVideoArgs](),
			Profiles:    wecomOnly,
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				args, err := tools.Decode[sendVideoArgs](call.Args)
				if err != nil {
					return "", err
				}
				if len(args.Title) > maxLinkTitle || len(args.Description) > maxLinkDescription {
					return "", fmt.Errorf("%w: title at most %d bytes, description at most %d", tools.ErrBadArgs, maxLinkTitle, maxLinkDescription)
				}
				return d.sendFile(ctx, call, wx.MediaVideo, args.Path, args.To, args.Title, args.Description)
			},
		},
		{
			Name:        "send_link",
			Description: "Send a link card (title, description, url, optional picture url) to the WeCom user of this conversation (or to another user).",
			Schema:      tools.SchemaFor[sendLinkArgs](),
			Profiles:    wecomOnly,
			Handler: func(ctx context.Context, call tools.Call) (string, error) {
				args, err := tools.Decode[sendLinkArgs](call.Args)
				if err != nil {
					return "", err
				}
				return d.sendLink(ctx, call, args)
			},
		},
	}
}

// recipient is args' to, or the conversation's user, when the caller may
// address them (ToolDeps.Recipients).
func (d ToolDeps) recipient(call tools.Call, to string) (string, error) {
	to = strings.TrimPrefix(strings.TrimSpace(to), Channel+":")
	if to == "" {
		if call.Channel != Channel {
			return "", fmt.Errorf("%w: this conversation is not on WeCom; give to (a WeCom user id)", tools.ErrBadArgs)
		}
		to = call.User
	}
	if to == "" {
		return "", fmt.Errorf("%w: no recipient; give to (a WeCom user id)", tools.ErrBadArgs)
	}
	return d.Recipients.Check(recipient.Caller{Channel: call.Channel, User: call.User, Session: call.Session}, Channel, to)
}

func (d ToolDeps) ready() error {
	if d.Open == nil || d.Upload == nil || d.Deliver == nil {
		return errors.New("the WeCom channel is not running on this agent")
	}
	return nil
}

// sendFile checks, uploads and queues a workspace file of kind.
func (d ToolDeps) sendFile(ctx context.Context, call tools.Call, kind, p, to, title, description string) (string, error) {
	if err := d.ready(); err != nil {
		return "", err
	}
	to, err := d.recipient(call, to)
	if err != nil {
		return "", err
	}
	f, fi, err := d.Open(call, p)
	if err != nil {
		return "", err // confined to the workspace; the message says why
	}
	defer f.Close()
	name := path.Base(strings.ReplaceAll(p, `\`, "/"))
	if err := wx.CheckMedia(kind, name, fi.Size()); err != nil {
		return "", fmt.Errorf("%s not sent, nothing uploaded: %s", p, mediaProblem(kind, name, fi.Size(), err))
	}
	if err := d.sendMedia(ctx, to, turn.Media{Kind: kind, Name: name, Body: f, Size: fi.Size(), Title: title, Description: description}); err != nil {
		return "", fmt.Errorf("%s %w", p, err)
	}
	return fmt.Sprintf("%s %s (%s) queued for %s", kind, p, upload.SizeText(int(fi.Size())), to), nil
}

// sendMedia uploads a file (image, file, video) and queues it, or queues
// a link card, in order with the user's text replies: the channel's
// SendMedia and the send_* tools. A file's errors say whether it was
// uploaded ("not sent: ...", "uploaded but not queued: ...").
func (d ToolDeps) sendMedia(ctx context.Context, to string, m turn.Media) error {
	out := OutMedia{Kind: m.Kind, Title: m.Title, Description: m.Description, URL: m.URL, PicURL: m.PicURL}
	if m.Kind == kindLink {
		return d.Deliver(ctx, to, out)
	}
	if m.Body == nil {
		return fmt.Errorf("not sent: %s %q without content", m.Kind, m.Name)
	}
	id, err := d.Upload(ctx, m.Kind, m.Name, m.Body, m.Size)
	if err != nil {
		return fmt.Errorf("not sent: upload to WeCom failed: %w", err)
	}
	out.MediaID = id
	if err := d.Deliver(ctx, to, out); err != nil {
		return fmt.Errorf("uploaded but not queued: %w", err)
	}
	return nil
}

// mediaProblem explains a CheckMedia failure for the model.
func mediaProblem(kind, name string, size int64, err error) string {
	switch kind {
	case wx.MediaImage:
		if size > 10<<20 {
			return fmt.Sprintf("the picture is %s; WeCom accepts at most 10 MB (make it smaller first)", upload.SizeText(int(size)))
		}
	case wx.MediaVideo:
		if size > 10<<20 {
			return fmt.Sprintf("the video is %s; WeCom accepts at most 10 MB (trim or re-encode it first)", upload.SizeText(int(size)))
		}
	case wx.MediaFile:
		if size > 20<<20 {
			return fmt.Sprintf("the file is %s; WeCom accepts at most 20 MB", upload.SizeText(int(size)))
		}
	}
	if size < wx.MinMediaBytes {
		return fmt.Sprintf("the file has %d bytes; WeCom needs at least %d", size, wx.MinMediaBytes)
	}
	return err.Error()
}

func (d ToolDeps) sendLink(ctx context.Context, call tools.Call, a sendLinkArgs) (string, error) {
	if d.Deliver == nil {
		return "", errors.New("the WeCom channel is not running on this agent")
	}
	to, err := d.recipient(call, a.To)
	if err != nil {
		return "", err
	}
	a.Title, a.Description = strings.TrimSpace(a.Title), strings.TrimSpace(a.Description)
	switch {
	case a.Title == "":
		return "", fmt.Errorf("%w: title is required", tools.ErrBadArgs)
	case len(a.Title) > maxLinkTitle || !utf8.ValidString(a.Title):
		return "", fmt.Errorf("%w: title is %d bytes, at most %d", tools.ErrBadArgs, len(a.Title), maxLinkTitle)
	case len(a.Description) > maxLinkDescription || !utf8.ValidString(a.Description):
		return "", fmt.Errorf("%w: description is %d bytes, at most %d", tools.ErrBadArgs, len(a.Description), maxLinkDescription)
	}
	if err := checkURL("url", a.URL, true); err != nil {
		return "", err
	}
	if err := checkURL("pic_url", a.PicURL, false); err != nil {
		return "", err
	}
	m := turn.Media{Kind: kindLink, Title: a.Title, Description: a.Description, URL: strings.TrimSpace(a.URL), PicURL: strings.TrimSpace(a.PicURL)}
	if err := d.sendMedia(ctx, to, m); err != nil {
		return "", fmt.Errorf("link not queued: %w", err)
	}
	return fmt.Sprintf("link %q queued for %s", a.Title, to), nil
}

func checkURL(field, s string, required bool) error {
	s = strings.TrimSpace(s)
	if s == "" {
		if required {
			return fmt.Errorf("%w: %s is required", tools.ErrBadArgs, field)
		}
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > maxLinkURL {
		return fmt.Errorf("%w: %s must be an http or https address (at most %d bytes), got %q", tools.ErrBadArgs, field, maxLinkURL, upload.Clean(s, 200))
	}
	return nil
}
