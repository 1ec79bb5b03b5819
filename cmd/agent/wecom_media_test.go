package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"agent/pkg/document/doctest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/nativetest"
	"agent/pkg/sandbox/sandboxtest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// The real daemon with llm.vision on: a picture sent on WeCom is saved in
// the workspace's uploads and reaches the model as image content; the
// model sends it back with send_image, which goes out before its text.
func TestWeComImageThroughTheDaemon(t *testing.T) {
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	var img bytes.Buffer
	png.Encode(&img, image.NewGray(image.Rect(0, 0, 8, 8)))
	api.PutMedia("PIC", wecomtest.Media{Kind: "image", Filename: "photo.png", ContentType: "image/png", Data: img.Bytes()})

	saved := regexp.MustCompile(`uploads/[0-9]+-3001\.png`)
	llm := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if r.Last().Role == "user" {
			args, _ := json.Marshal(map[string]string{"path": saved.FindString(string(r.Body))})
			return llmtest.Calls(llmtest.Call("send_image", string(args)))
		}
		return llmtest.Text("Nice picture.")
	})

	dir := t.TempDir()
	cfg := strings.Replace(wecomConfig(llm.URL(), api.URL, "open"), "[llm]\n", "[llm]\nvision = true\n", 1)
	writeConfig(t, dir, cfg)
	_, base, crypto := startWeCom(t, dir)
	m := &wx.Message{ToUserName: e2eCorpID, FromUserName: "zed", CreateTime: time.Now().Unix(), MsgType: wx.MsgImage,
		PicURL: "http://pic.invalid/x", MediaID: "PIC", MsgID: "3001", AgentID: e2eAgent}
	if ok, err := postCallback(http.DefaultClient, crypto, base, m, "1"); !ok || err != nil {
		t.Fatalf("callback: %v %v", ok, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(api.Messages()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; sent %+v", api.Messages())
		}
		time.Sleep(20 * time.Millisecond) // polling a separate process
	}
	first := llm.Request(0).Body // the first model request of the turn
	if !bytes.Contains(first, []byte(`"image_url"`)) || !bytes.Contains(first, []byte(`data:image/png;base64,`)) {
		t.Errorf("the model request has no image part: %.600s", first)
	}
	if tools := llm.Request(0).ToolNames(); !strings.Contains(strings.Join(tools, ","), "send_image") {
		t.Errorf("tools offered on wecom: %v", tools)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "workspace", "files", "wecom%3Azed", "uploads", "*-3001.png"))
	if len(files) != 1 {
		t.Fatalf("saved uploads: %v", files)
	}
	if got, _ := os.ReadFile(files[0]); !bytes.Equal(got, img.Bytes()) {
		t.Error("saved picture differs")
	}
	sent := api.Messages()
	if sent[0].MsgType != "image" || sent[1].Content != "Nice picture." {
		t.Fatalf("sent %+v", sent)
	}
	if back, ok := api.Media(sent[0].MediaID); !ok || !bytes.Equal(back.Data, img.Bytes()) {
		t.Errorf("send_image uploaded %+v", back)
	}
}

// The real daemon: a PDF sent on WeCom is saved in the sender's uploads,
// the turn tells the model read_document reads it, and the model's
// read_document call returns its text (pdftotext in the sender's
// sandbox), which the answer carries back to WeCom.
func TestWeComDocumentThroughTheDaemon(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap
	nativetest.LookPath(t, "pdftotext", "poppler-utils")
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	pdf := doctest.PDF([]string{"季度报告 Quarterly report", "第二页 revenue 42"})
	api.PutMedia("DOC", wecomtest.Media{Kind: "file", Filename: "报告.pdf", ContentType: "application/pdf", Data: pdf})

	saved := regexp.MustCompile(`uploads/[0-9]+-3101\.pdf; read_document reads it`)
	llm := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if r.Last().Role == "user" {
			p := strings.TrimSuffix(saved.FindString(string(r.Body)), "; read_document reads it")
			args, _ := json.Marshal(map[string]string{"path": p})
			return llmtest.Calls(llmtest.Call("read_document", string(args)))
		}
		return llmtest.Text("The report says: " + r.Last().Content)
	})
	dir := sandboxtest.Dir(t) // a root daemon's sandboxes (as nobody) reach it
	writeConfig(t, dir, wecomConfig(llm.URL(), api.URL, "open"))
	_, base, crypto := startWeCom(t, dir)
	// The sandbox probe runs after READY; read_document reads PDFs once
	// it has passed.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, body := httpGet(t, base+"/healthz", ""); strings.Contains(body, `"name":"sandbox","status":"ok"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox is not ready after 30 s")
		}
		time.Sleep(20 * time.Millisecond) // polling a separate process
	}
	m := &wx.Message{ToUserName: e2eCorpID, FromUserName: "zed", CreateTime: time.Now().Unix(), MsgType: wx.MsgFile,
		FileName: "报告.pdf", MediaID: "DOC", MsgID: "3101", AgentID: e2eAgent}
	if ok, err := postCallback(http.DefaultClient, crypto, base, m, "1"); !ok || err != nil {
		t.Fatalf("callback: %v %v", ok, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(api.Messages()) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out; sent %+v", api.Messages())
		}
		time.Sleep(20 * time.Millisecond) // polling a separate process
	}
	got := api.Messages()[0].Content
	for _, want := range []string{"The report says:", "--- Page 1 of 2 ---", "季度报告 Quarterly report", "第二页 revenue 42"} {
		if !strings.Contains(got, want) {
			t.Errorf("answer lacks %q:\n%s", want, got)
		}
	}
}
