package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Media kinds for UploadMedia and SendMedia.
const (
	MediaImage = "image"
	MediaVoice = "voice"
	MediaVideo = "video"
	MediaFile  = "file"
)

// MinMediaBytes is the smallest upload WeCom accepts.
const MinMediaBytes = 5

// maxErrorBody is how much of a media/get answer without a file name is
// read to recognise a JSON error.
const maxErrorBody = 64 << 10

// mediaLimit is WeCom's size and type limit for one media kind.
type mediaLimit struct {
	max  int64
	exts []string // allowed lower-case extensions; nil allows any
}

// mediaLimits follows WeCom's documented limits (MB taken as MiB).
func mediaLimits(kind string) (mediaLimit, bool) {
	switch kind {
	case MediaImage:
		return mediaLimit{max: 10 << 20, exts: []string{".jpg", ".jpeg", ".png"}}, true
	case MediaVoice:
		return mediaLimit{max: 2 << 20, exts: []string{".amr"}}, true
	case MediaVideo:
		return mediaLimit{max: 10 << 20, exts: []string{".mp4"}}, true
	case MediaFile:
		return mediaLimit{max: 20 << 20}, true
	}
	return mediaLimit{}, false
}

// CheckMedia reports whether an upload of kind, filename and size is within
// WeCom's limits, without uploading anything.
func CheckMedia(kind, filename string, size int64) error {
	lim, ok := mediaLimits(kind)
	if !ok {
		return fmt.Errorf("wecom: check media: unknown kind %q (want image, voice, video or file): %w", kind, ErrMediaSize)
	}
	if size < MinMediaBytes {
		return fmt.Errorf("wecom: check media: %s of %d bytes, minimum %d: %w", kind, size, MinMediaBytes, ErrMediaSize)
	}
	if size > lim.max {
		return fmt.Errorf("wecom: check media: %s of %d bytes, limit %d: %w", kind, size, lim.max, ErrMediaSize)
	}
	if strings.TrimSpace(filename) == "" {
		return fmt.Errorf("wecom: check media: empty file name")
	}
	if lim.exts != nil {
		ext := strings.ToLower(path.Ext(filename))
		ok := false
		for _, e := range lim.exts {
			ok = ok || e == ext
		}
		if !ok {
			return fmt.Errorf("wecom: check media: %s must be %s, got %q: %w",
				kind, strings.Join(lim.exts, " or "), ext, ErrMediaSize)
		}
	}
	return nil
}

type uploadAnswer struct {
	apiStatus
	Type    string `json:"type"`
	MediaID string `json:"media_id"`
}

// UploadMedia uploads size bytes read from r as temporary media (valid for
// three days) and returns its media id. Limits are checked before anything
// is read; the content is buffered in memory (at most 20 MiB) so that a
// retry can resend it.
func (c *Client) UploadMedia(ctx context.Context, kind, filename string, r io.Reader, size int64) (string, error) {
	const op = "upload media"
	if err := CheckMedia(kind, filename, size); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return "", fmt.Errorf("wecom: %s: read: %w", op, err)
	}
	if int64(len(data)) != size {
		return "", fmt.Errorf("wecom: %s: declared %d bytes, reader had %s", op, size, readSize(len(data), size))
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="media"; filename="%s"; filelength=%d`,
		quoteFilename(filename), size))
	h.Set("Content-Type", "application/octet-stream")
	part, err := mw.CreatePart(h)
	if err != nil {
		return "", fmt.Errorf("wecom: %s: %w", op, err)
	}
	if _, err := part.Write(data); err != nil {
		return "", fmt.Errorf("wecom: %s: %w", op, err)
	}
	if err := mw.Close(); err != nil {
		return "", fmt.Errorf("wecom: %s: %w", op, err)
	}
	var res uploadAnswer
	err = c.authed(ctx, op, func(ctx context.Context, tok string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			c.endpoint("/cgi-bin/media/upload", url.Values{"access_token": {tok}, "type": {kind}}),
			bytes.NewReader(body.Bytes()))
		if err != nil {
			return final{redact(err)}
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		var o uploadAnswer
		if err := c.doJSON(req, &o); err != nil {
			return err
		}
		res = o
		return nil
	})
	if err != nil {
		return "", err
	}
	if res.MediaID == "" {
		return "", fmt.Errorf("wecom: %s: answer without media_id", op)
	}
	return res.MediaID, nil
}

func readSize(n int, size int64) string {
	if int64(n) > size {
		return "more"
	}
	return strconv.Itoa(n)
}

// quoteFilename escapes a file name for a quoted header parameter.
func quoteFilename(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// GetMedia downloads temporary media of at most maxBytes. A JSON error
// answered in place of the file becomes an *APIError (40007: unknown or
// expired media id). filename is the base name the server suggested, or "".
func (c *Client) GetMedia(ctx context.Context, mediaID string, maxBytes int64) (data []byte, contentType, filename string, err error) {
	const op = "get media"
	if mediaID == "" {
		return nil, "", "", fmt.Errorf("wecom: %s: empty media id", op)
	}
	if maxBytes <= 0 {
		return nil, "", "", fmt.Errorf("wecom: %s: maxBytes must be positive", op)
	}
	err = c.authed(ctx, op, func(ctx context.Context, tok string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			c.endpoint("/cgi-bin/media/get", url.Values{"access_token": {tok}, "media_id": {mediaID}}), nil)
		if err != nil {
			return final{redact(err)}
		}
		d, ct, fn, err := c.fetchMedia(req, maxBytes)
		if err != nil {
			return err
		}
		data, contentType, filename = d, ct, fn
		return nil
	})
	if err != nil {
		return nil, "", "", err
	}
	return data, contentType, filename, nil
}

func (c *Client) fetchMedia(req *http.Request, maxBytes int64) ([]byte, string, string, error) {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, "", "", redact(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, "", "", &statusError{Status: resp.StatusCode}
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	cd := resp.Header.Get("Content-Disposition")
	// Without Content-Disposition the answer may be a JSON error, whatever
	// its Content-Type; read enough to recognise one.
	limit := maxBytes
	if cd == "" {
		limit = max(limit, maxErrorBody)
	} else if resp.ContentLength > maxBytes {
		return nil, "", "", final{fmt.Errorf("media of %d bytes, limit %d: %w", resp.ContentLength, maxBytes, ErrMediaSize)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", "", redact(err)
	}
	if cd == "" {
		if err := jsonAnswerError(body); err != nil {
			return nil, "", "", err
		}
		if mt == "application/json" {
			return nil, "", "", final{fmt.Errorf("%s answer instead of media", mt)}
		}
	}
	if int64(len(body)) > maxBytes {
		return nil, "", "", final{fmt.Errorf("media over %d bytes: %w", maxBytes, ErrMediaSize)}
	}
	return body, ct, dispositionFilename(cd), nil
}

// jsonAnswerError returns the error a JSON errcode answer stands for, or
// nil when body is not such an answer.
func jsonAnswerError(body []byte) error {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' || len(b) > maxErrorBody {
		return nil
	}
	var st apiStatus
	if json.Unmarshal(b, &st) != nil || st.ErrCode == nil {
		return nil
	}
	if err := st.err(); err != nil {
		return err
	}
	return final{fmt.Errorf("errcode 0 answer instead of media")}
}

// dispositionFilename extracts a safe base name from Content-Disposition.
func dispositionFilename(cd string) string {
	if cd == "" {
		return ""
	}
	name := ""
	if _, params, err := mime.ParseMediaType(cd); err == nil {
		name = params["filename"]
	} else if _, after, ok := strings.Cut(cd, "filename="); ok {
		name = strings.Trim(strings.TrimSpace(strings.Split(after, ";")[0]), `"`)
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, name)
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	if name == "." || name == "/" || name == ".." {
		return ""
	}
	return name
}
