package daemon

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
	"agent/pkg/workspace"
)

func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Pictures, files and mixed messages on the AI Bot channel: downloaded
// from WeCom's URL, decrypted with the resource's key, kept in the
// sender's uploads and given to the model (a picture as image content
// when llm.vision is on), as on the app channel. An expired URL tells the
// user, not the model. The spool is empty once the turns are committed.
func TestWeComBotMedia(t *testing.T) {
	var mu sync.Mutex
	var seen []llmtest.Message
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		mu.Lock()
		seen = append(seen, r.Last())
		mu.Unlock()
		return llmtest.Reply{Chunks: []string{"Seen it"}}
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	cfg := strings.Replace(botConfig(llmSrv.BaseURL(), bot.URL()), "[security]", "vision = true\n[security]", 1)
	_, stop := startDaemonIn(t, dir, cfg)
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	last := func() llmtest.Message {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	pic := testPNG(t)
	uploads := filepath.Join(dir, "ws", workspace.FilesDir, workspace.ScopeDir("wecom:zhangsan"), workspace.UploadsDir)
	day := time.Now().Format("20060102")

	// A picture: the model gets it as image content.
	u, k := bot.Serve(pic, "")
	waitFinished(t, bot, bot.Media("img1", "zhangsan", "single", "", "image", u, k))
	m := last()
	if len(m.Parts) < 2 || m.Parts[len(m.Parts)-1].Type != "image_url" || !strings.HasPrefix(m.Parts[len(m.Parts)-1].ImageURL, "data:image/png;base64,") {
		t.Fatalf("the model did not get the picture: %+v", m)
	}
	if got, err := os.ReadFile(filepath.Join(uploads, day+"-img1.png")); err != nil || !bytes.Equal(got, pic) {
		t.Fatalf("picture not kept decrypted in the uploads: %v", err)
	}

	// A file, named by its download: the model is told where it is.
	pdf := []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")
	u, k = bot.Serve(pdf, "../../季度报告.pdf")
	waitFinished(t, bot, bot.Media("file1", "zhangsan", "single", "", "file", u, k))
	if c := last().Content; !strings.Contains(c, `"../../季度报告.pdf"`) || !strings.Contains(c, "uploads/"+day+"-file1.pdf") {
		t.Fatalf("the model was told %q", c)
	}
	if got, err := os.ReadFile(filepath.Join(uploads, day+"-file1.pdf")); err != nil || !bytes.Equal(got, pdf) {
		t.Fatalf("file not kept: %v", err)
	}

	// Mixed: its text and its picture make one question.
	u, k = bot.Serve(pic, "")
	waitFinished(t, bot, bot.Mixed("mix1", "lisi", "group", "chat-1", aibottest.Item{Text: "@bot what is this?"}, aibottest.Item{URL: u, AESKey: k}))
	m = last()
	if !strings.Contains(m.Content, "what is this?") || strings.Contains(m.Content, "@bot") || m.Parts[len(m.Parts)-1].Type != "image_url" {
		t.Fatalf("mixed message reached the model as %+v", m)
	}

	// An expired URL: the user is told, the model is not asked.
	n := llmSrv.Count()
	u, k = bot.Serve(pic, "")
	bot.Expire(u, http.StatusNotFound)
	bot.Media("img2", "zhangsan", "single", "", "image", u, k)
	if _, ok := bot.Await(20*time.Second, 0, func(f aibot.Frame) bool {
		return f.Cmd == aibot.CmdSend && strings.Contains(string(f.Body), "could not get your picture")
	}); !ok {
		t.Fatal("no notice for a picture that could not be downloaded")
	}
	if got := llmSrv.Count(); got != n {
		t.Fatalf("%d model calls for a failed download", got-n)
	}
	spool := filepath.Join(dir, "var", "wecom_bot", "media")
	ents, _ := os.ReadDir(spool)
	if len(ents) != 0 {
		t.Fatalf("spool not emptied after the turns: %d entries", len(ents))
	}
}
