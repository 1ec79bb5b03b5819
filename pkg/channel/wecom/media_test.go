package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/conversation"
	"agent/pkg/nativetest"
	"agent/pkg/recipient"
	"agent/pkg/tools"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
	"agent/pkg/workspace"
)

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mediaMsg(from, id, kind, mediaID string) *wx.Message {
	return &wx.Message{ToUserName: testCorpID, FromUserName: from, CreateTime: 1_700_000_000, MsgType: kind,
		MediaID: mediaID, MsgID: id, AgentID: testAgent}
}

// mediaRig is a rig whose processor downloads media into a workspace; it
// returns the workspace and alice's own folder in it.
func mediaRig(t *testing.T, vision bool, asr func() Recognizer) (*rig, string) {
	t.Helper()
	ws := t.TempDir()
	spaces, err := workspace.Open(workspace.Config{Dir: ws, Quota: func() int64 { return 1 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	var client *wx.Client
	r := newRig(t, "", func(pc *ProcessorConfig) {
		pc.Uploads = spaces
		pc.Vision = func() bool { return vision }
		pc.ASR = asr
		pc.Media = mediaGetterFunc(func(ctx context.Context, id string, max int64) ([]byte, string, string, error) {
			return client.GetMedia(ctx, id, max)
		})
	})
	client = r.client
	alice := filepath.Join(ws, workspace.FilesDir, workspace.ScopeDir("wecom:alice"))
	if err := os.MkdirAll(alice, 0o700); err != nil {
		t.Fatal(err)
	}
	return r, alice
}

type mediaGetterFunc func(ctx context.Context, id string, max int64) ([]byte, string, string, error)

func (f mediaGetterFunc) GetMedia(ctx context.Context, id string, max int64) ([]byte, string, string, error) {
	return f(ctx, id, max)
}

// An image callback is acknowledged at once (stored with its MediaId, not
// downloaded), then the processor saves it under uploads/<user>/ — never
// where WeCom's file name points — and gives it to a vision model as an
// image part of the same turn as the text sent with it.
func TestInboundImage(t *testing.T) {
	for _, vision := range []bool{true, false} {
		t.Run(map[bool]string{true: "vision", false: "no vision"}[vision], func(t *testing.T) {
			r, ws := mediaRig(t, vision, nil)
			pic := pngBytes(t)
			r.api.PutMedia("IMG1", wecomtest.Media{Kind: "image", Filename: "../../evil.png", ContentType: "image/png", Data: pic})
			r.ok(mediaMsg("alice", "2001", wx.MsgImage, "IMG1"))
			if n := r.count(`SELECT count(*) FROM inbox WHERE msg_type = 'image' AND state = 0 AND raw LIKE '%IMG1%'`); n != 1 {
				t.Fatalf("image row not stored pending with its media id: %d", n)
			}
			r.ok(text("alice", "2002", "what is this?"))
			r.start()
			eventually(t, r.clock, time.Second, "the turn", func() bool { return len(r.sentTo("alice")) == 1 })
			turns := r.conv.Turns()
			if len(turns) != 1 {
				t.Fatalf("%d turns, want 1 (debounced)", len(turns))
			}
			want := filepath.Join(ws, "uploads", r.clock.Now().Format("20060102")+"-2001.png")
			got, err := os.ReadFile(want)
			if err != nil || !bytes.Equal(got, pic) {
				t.Fatalf("saved picture %s: %v (%d bytes)", want, err, len(got))
			}
			rel := "uploads/" + filepath.Base(want)
			in := turns[0]
			if !strings.Contains(in.Text, rel) || !strings.Contains(in.Text, "what is this?") {
				t.Fatalf("turn text %q", in.Text)
			}
			if vision {
				if len(in.Images) != 1 || !strings.HasPrefix(in.Images[0].ImageURL, "data:image/png;base64,") {
					t.Fatalf("images %+v", in.Images)
				}
			} else {
				if len(in.Images) != 0 || !strings.Contains(in.Text, "[image saved to "+rel+"]") {
					t.Fatalf("without vision: text %q, %d images", in.Text, len(in.Images))
				}
			}
			filepath.Walk(filepath.Dir(ws), func(p string, _ os.FileInfo, _ error) error {
				if strings.Contains(p, "evil") {
					t.Errorf("WeCom's file name chose a path: %s", p)
				}
				return nil
			})
		})
	}
}

// A picture that cannot be downloaded gets the user a clear reply; the
// text sent with it is still answered.
func TestInboundMediaDownloadFails(t *testing.T) {
	r, _ := mediaRig(t, true, nil)
	r.ok(mediaMsg("alice", "2101", wx.MsgImage, "EXPIRED"))
	r.ok(text("alice", "2102", "and hello"))
	r.start()
	eventually(t, r.clock, time.Second, "the replies", func() bool { return len(r.sentTo("alice")) == 2 })
	got := r.sentTo("alice")
	if !strings.Contains(got[0], "could not get your picture") || !strings.HasPrefix(got[1], "echo: ") || !strings.Contains(got[1], "and hello") {
		t.Fatalf("replies %q", got)
	}
	if n := r.count(`SELECT count(*) FROM inbox WHERE state = 1`); n != 2 {
		t.Fatalf("%d rows done, want 2", n)
	}
}

// Files and videos are saved and described; a link is described.
func TestInboundFileVideoLink(t *testing.T) {
	r, ws := mediaRig(t, false, nil)
	r.api.PutMedia("F1", wecomtest.Media{Kind: "file", Filename: "report.pdf", Data: []byte("%PDF-1.4 hello")})
	r.api.PutMedia("V1", wecomtest.Media{Kind: "video", Filename: "clip.mp4", Data: []byte("not really a video")})
	f := mediaMsg("alice", "2201", wx.MsgFile, "F1")
	f.FileName = "../../report.pdf"
	r.ok(f)
	r.ok(mediaMsg("alice", "2202", wx.MsgVideo, "V1"))
	r.ok(&wx.Message{ToUserName: testCorpID, FromUserName: "alice", CreateTime: 1_700_000_000, MsgType: wx.MsgLink,
		MsgID: "2203", Title: "Go 1.26", Description: "release notes", URL: "https://go.dev/doc/go1.26"})
	r.start()
	eventually(t, r.clock, time.Second, "the turn", func() bool { return len(r.conv.Turns()) == 1 })
	day := r.clock.Now().Format("20060102")
	for _, name := range []string{day + "-2201.pdf", day + "-2202.mp4"} {
		if _, err := os.Stat(filepath.Join(ws, "uploads", name)); err != nil {
			t.Errorf("not saved: %v", err)
		}
	}
	in := r.conv.Turns()[0].Text
	for _, want := range []string{`"../../report.pdf"`, "uploads/" + day + "-2201.pdf; read_document reads it", "uploads/" + day + "-2202.mp4; trim_video", "Go 1.26", "https://go.dev/doc/go1.26"} {
		if !strings.Contains(in, want) {
			t.Errorf("turn text lacks %q:\n%s", want, in)
		}
	}
}

// Without a speech recogniser a voice message gets a clear reply and no
// turn.
func TestInboundVoiceWithoutASR(t *testing.T) {
	r, _ := mediaRig(t, false, func() Recognizer { return nil })
	r.api.PutMedia("VOICE1", wecomtest.Media{Kind: "voice", Filename: "v.amr", Data: synthAMR(50)})
	m := mediaMsg("alice", "2301", wx.MsgVoice, "VOICE1")
	m.Format = "amr"
	r.ok(m)
	r.start()
	eventually(t, r.clock, time.Second, "the reply", func() bool { return len(r.sentTo("alice")) == 1 })
	if got := r.sentTo("alice")[0]; !strings.Contains(got, "cannot listen to voice messages") {
		t.Fatalf("reply %q", got)
	}
	if n := len(r.conv.Turns()); n != 0 {
		t.Fatalf("%d turns", n)
	}
}

// synthAMR is an AMR-NB file of n 20 ms frames in 12.2 kbit/s mode with
// random payloads: valid for a decoder, noise to a listener. (Debian's
// ffmpeg decodes AMR but cannot encode it.)
func synthAMR(n int) []byte {
	rng := rand.New(rand.NewSource(1))
	b := []byte("#!AMR\n")
	for range n {
		frame := make([]byte, 32)
		frame[0] = 7<<3 | 1<<2 // FT 7 (12.2 kbit/s), quality bit
		rng.Read(frame[1:])
		b = append(b, frame...)
	}
	return b
}

// speexSpeech is espeak-ng speech encoded by ffmpeg's libspeex (Ogg).
func speexSpeech(t *testing.T, text string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	wav, spx := filepath.Join(dir, "x.wav"), filepath.Join(dir, "x.spx")
	if out, err := exec.Command("espeak-ng", "-w", wav, text).CombinedOutput(); err != nil {
		return nil, &exec.Error{Name: "espeak-ng", Err: errString(string(out) + err.Error())}
	}
	if out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", wav, "-ar", "16000", "-ac", "1", "-c:a", "libspeex", spx).CombinedOutput(); err != nil {
		return nil, &exec.Error{Name: "ffmpeg libspeex", Err: errString(string(out) + err.Error())}
	}
	return os.ReadFile(spx)
}

type errString string

func (e errString) Error() string { return string(e) }

// mediaTools are the send_* tools on a workspace, uploading to the rig's
// fake API and delivering through its processor; uploads counts uploads.
func mediaTools(t *testing.T, r *rig, ws string) (*tools.Registry, *atomic.Int32) {
	t.Helper()
	w, err := tools.OpenWorkspace(ws, tools.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	var uploads atomic.Int32
	reg := tools.NewRegistry()
	for _, tool := range MediaTools(ToolDeps{
		Open: func(_ tools.Call, p string) (*os.File, os.FileInfo, error) { return w.Open(p) },
		Upload: func(ctx context.Context, kind, name string, rd io.Reader, size int64) (string, error) {
			uploads.Add(1)
			return r.client.UploadMedia(ctx, kind, name, rd, size)
		},
		Deliver: r.proc.Deliver,
		// alice is an owner: she may send to others; carol is not.
		Recipients: recipient.Policy{IsOwner: func(p string) bool { return p == "wecom:alice" }},
	}) {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return reg, &uploads
}

func toolCall(args any) tools.Call {
	raw, _ := json.Marshal(args)
	return tools.Call{Args: raw, User: "alice", Channel: Channel, Profile: Channel, Session: "wecom:p2p:alice"}
}

// send_image inside a turn goes out after the text the turn replied before
// it and before the text after it; outside a turn, after what is queued.
func TestSendImageOrdered(t *testing.T) {
	r, ws := mediaRig(t, false, nil)
	if err := os.WriteFile(filepath.Join(ws, "cat.png"), pngBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, _ := mediaTools(t, r, ws)
	toolErr := make(chan error, 1)
	r.conv.handle = func(ctx context.Context, in conversation.Inbound, reply conversation.Reply) {
		reply(ctx, "here is the cat:")
		_, err := reg.Run(ctx, "send_image", toolCall(map[string]string{"path": "cat.png"}))
		toolErr <- err
		reply(ctx, "did it arrive?")
	}
	r.ok(text("alice", "2401", "show me the cat"))
	r.start()
	eventually(t, r.clock, time.Second, "three messages", func() bool { return len(r.api.Messages()) == 3 })
	if err := <-toolErr; err != nil {
		t.Fatal(err)
	}
	msgs := r.api.Messages()
	if msgs[0].Content != "here is the cat:" || msgs[1].MsgType != "image" || msgs[2].Content != "did it arrive?" {
		t.Fatalf("order: %+v", msgs)
	}
	if m, ok := r.api.Media(msgs[1].MediaID); !ok || !bytes.Equal(m.Data, pngBytes(t)) || m.Filename != "cat.png" {
		t.Fatalf("uploaded media %+v %v", m, ok)
	}

	// Outside a turn: after the text already queued for bob.
	if err := r.outbox.Enqueue(context.Background(), "bob", "a text first"); err != nil {
		t.Fatal(err)
	}
	call := toolCall(map[string]string{"path": "cat.png", "to": "wecom:bob"})
	if _, err := reg.Run(context.Background(), "send_image", call); err != nil {
		t.Fatal(err)
	}
	lc := toolCall(map[string]string{"title": "Cats", "description": "more cats", "url": "https://example.com/cats", "to": "bob"})
	if _, err := reg.Run(context.Background(), "send_link", lc); err != nil {
		t.Fatal(err)
	}
	eventually(t, r.clock, time.Second, "bob's messages", func() bool { return len(r.api.Messages()) == 6 })
	var bob []wecomtest.Sent
	for _, m := range r.api.Messages() {
		if m.ToUser == "bob" {
			bob = append(bob, m)
		}
	}
	if len(bob) != 3 || bob[0].Content != "a text first" || bob[1].MsgType != "image" || bob[2].MsgType != "news" ||
		bob[2].Articles[0].URL != "https://example.com/cats" || bob[2].Articles[0].Title != "Cats" {
		t.Fatalf("bob got %+v", bob)
	}
}

// The attack: a user (not an owner) sends a workspace file or a link card
// to a colleague, to everyone or to a list. Refused before any upload.
func TestSendToOthersRefused(t *testing.T) {
	r, ws := mediaRig(t, false, nil)
	if err := os.WriteFile(filepath.Join(ws, "cat.png"), pngBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, uploads := mediaTools(t, r, ws)
	r.start()
	carol := func(args map[string]string) tools.Call {
		c := toolCall(args)
		c.User, c.Session = "carol", "p2p:wecom:carol"
		return c
	}
	for _, to := range []string{"bob", "@all", "ceo|cfo|hr", "wecom:bob"} {
		if _, err := reg.Run(context.Background(), "send_image", carol(map[string]string{"path": "cat.png", "to": to})); !errors.Is(err, recipient.ErrRefused) {
			t.Errorf("send_image to %s: %v", to, err)
		}
		if _, err := reg.Run(context.Background(), "send_link", carol(map[string]string{"title": "x", "url": "https://example.com", "to": to})); !errors.Is(err, recipient.ErrRefused) {
			t.Errorf("send_link to %s: %v", to, err)
		}
	}
	if n := uploads.Load(); n != 0 {
		t.Errorf("%d uploads for refused sends", n)
	}
	if _, err := reg.Run(context.Background(), "send_image", carol(map[string]string{"path": "cat.png"})); err != nil {
		t.Fatalf("carol to herself: %v", err)
	}
	eventually(t, r.clock, time.Second, "carol's picture", func() bool { return len(r.api.Messages()) == 1 })
	if m := r.api.Messages()[0]; m.ToUser != "carol" {
		t.Fatalf("sent to %s", m.ToUser)
	}
}

// send_file refuses, before any upload, what is too large, of the wrong
// type or outside the workspace.
func TestSendFileRefusals(t *testing.T) {
	r, ws := mediaRig(t, false, nil)
	reg, uploads := mediaTools(t, r, ws)
	outside := filepath.Join(filepath.Dir(ws), "secret.txt")
	if err := os.WriteFile(outside, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(ws, "big.zip"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(21 << 20) // sparse
	big.Close()
	os.WriteFile(filepath.Join(ws, "pic.gif"), []byte("GIF89a......"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "link.txt"))
	for _, tc := range []struct {
		tool, path, want string
	}{
		{"send_file", "big.zip", "at most 20 MB"},
		{"send_image", "pic.gif", ".jpg or .jpeg or .png"},
		{"send_file", "../secret.txt", "outside the workspace"},
		{"send_file", "sub/../../secret.txt", "outside the workspace"},
		{"send_file", outside, "outside the workspace"},
		{"send_file", "link.txt", "outside the workspace"},
		{"send_file", "missing.txt", "no such file"},
	} {
		_, err := reg.Run(context.Background(), tc.tool, toolCall(map[string]string{"path": tc.path}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error saying %q", tc.tool, tc.path, err, tc.want)
		}
	}
	if n := uploads.Load(); n != 0 {
		t.Fatalf("%d uploads", n)
	}
	if _, err := reg.Run(context.Background(), "send_link", toolCall(map[string]string{"title": "x", "url": "javascript:alert(1)"})); err == nil {
		t.Error("send_link accepted a javascript: url")
	}
	voice := toolCall(map[string]string{"path": "big.zip"})
	voice.Profile = "voice"
	if _, err := reg.Run(context.Background(), "send_file", voice); err == nil {
		t.Error("send_file ran on the voice profile")
	}
	if n := len(r.api.Messages()); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}

// Voice messages (speex made from espeak-ng speech, and AMR) go through
// ffmpeg and the local whisper model (random weights: the words are
// meaningless) and become a text turn.
func TestInboundVoiceTranscribed(t *testing.T) {
	nativetest.FFmpeg(t)
	model := asrtest.TinyModel(t, false)
	rec, err := asr.New(asr.Config{ModelPath: model, Language: "en", Threads: asrtest.Threads, MaxTokens: 8}, nil)
	if err != nil {
		if errors.Is(err, asr.ErrNotBuilt) {
			asrtest.Unavailable(t, "whisper.cpp", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	spx, err := speexSpeech(t, "Please call me back tomorrow morning.")
	if err != nil {
		asrtest.Unavailable(t, "espeak-ng speech as speex", err)
	}
	var transcribed atomic.Int32
	r, ws := mediaRig(t, false, func() Recognizer { return countingRecognizer{rec, &transcribed} })
	r.api.PutMedia("SPX", wecomtest.Media{Kind: "voice", Filename: "a.speex", Data: spx})
	r.api.PutMedia("AMR", wecomtest.Media{Kind: "voice", Filename: "b.amr", Data: synthAMR(100)})
	m := mediaMsg("alice", "2501", wx.MsgVoice, "SPX")
	m.Format = "speex"
	r.ok(m)
	m = mediaMsg("bob", "2502", wx.MsgVoice, "AMR")
	m.Format = "amr"
	r.ok(m)
	r.start()
	// Whisper under -race takes some 15 s per message on two cores: a
	// longer guard against a hang than eventually's.
	deadline := time.Now().Add(3 * time.Minute)
	for len(r.sentTo("alice")) != 1 || len(r.sentTo("bob")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for both voice messages to be handled")
		}
		r.clock.Advance(time.Second)
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	if n := transcribed.Load(); n != 2 {
		t.Fatalf("%d transcriptions, want 2", n)
	}
	// The random model's transcripts are deterministic and not empty, so
	// each voice message is a text turn.
	turns := r.conv.Turns()
	for _, user := range []string{"alice", "bob"} {
		var turn *conversation.Inbound
		for i := range turns {
			if turns[i].Sender == user {
				turn = &turns[i]
			}
		}
		const prefix = "[voice message, transcribed] "
		if turn == nil || !strings.HasPrefix(turn.Text, prefix) || len(turn.Text) <= len(prefix) {
			t.Fatalf("%s: turn %+v; replies %q", user, turn, r.sentTo(user))
		}
	}
	// The file name's date is the (fake, advancing) clock's when it was
	// saved; the message id is what identifies it.
	// Each in the sender's own folder (ws is alice's).
	for p, dir := range map[string]string{"*-2501.spx": ws, "*-2502.amr": filepath.Join(filepath.Dir(ws), workspace.ScopeDir("wecom:bob"))} {
		if m, _ := filepath.Glob(filepath.Join(dir, "uploads", p)); len(m) != 1 {
			t.Errorf("voice not saved: %s/uploads/%s matches %q", dir, p, m)
		}
	}
}

type countingRecognizer struct {
	r Recognizer
	n *atomic.Int32
}

func (c countingRecognizer) Transcribe(ctx context.Context, s []float32) (asr.Result, error) {
	c.n.Add(1)
	return c.r.Transcribe(ctx, s)
}

// A picture that would take the sender's folder over its quota is not
// kept, and the sender is told why.
func TestInboundMediaOverQuota(t *testing.T) {
	spaces, err := workspace.Open(workspace.Config{Dir: t.TempDir(), Quota: func() int64 { return 16 }})
	if err != nil {
		t.Fatal(err)
	}
	var client *wx.Client
	r := newRig(t, "", func(pc *ProcessorConfig) {
		pc.Uploads = spaces
		pc.Media = mediaGetterFunc(func(ctx context.Context, id string, max int64) ([]byte, string, string, error) {
			return client.GetMedia(ctx, id, max)
		})
	})
	client = r.client
	r.api.PutMedia("IMG9", wecomtest.Media{Kind: "image", Filename: "big.png", ContentType: "image/png", Data: pngBytes(t)})
	r.ok(mediaMsg("alice", "2901", wx.MsgImage, "IMG9"))
	r.start()
	eventually(t, r.clock, time.Second, "the notice", func() bool { return len(r.sentTo("alice")) >= 1 })
	if got := r.sentTo("alice")[0]; !strings.Contains(got, "your folder is full") {
		t.Fatalf("notice %q", got)
	}
	if n, _ := spaces.Usage("wecom:alice"); n != 0 {
		t.Fatalf("usage %d after a refused upload", n)
	}
}

// A link a user shares reaches the turn with its URL and the hint that
// web_fetch reads it; a link card without a URL gets no hint.
func TestLinkTurnText(t *testing.T) {
	got := TurnText(&wx.Message{MsgType: wx.MsgLink, Title: "Tidal power", Description: "News", URL: "https://news.example/a"})
	want := "[The user shared a link: Tidal power — News — https://news.example/a] (web_fetch reads the page)"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := TurnText(&wx.Message{MsgType: wx.MsgLink, Title: "No URL"}); strings.Contains(got, "web_fetch") {
		t.Fatalf("no URL: %q", got)
	}
}
