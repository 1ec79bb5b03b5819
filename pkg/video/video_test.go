package video_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/nativetest"
	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/tools"
	"agent/pkg/video"
	"agent/pkg/workspace"
)

// env is a workspace with alice's fixtures and the video tools over a
// real sandbox.
type env struct {
	reg   *tools.Registry
	ws    *workspace.Spaces
	alice string // alice's folder (host path)
}

// newEnv makes the workspace and the tools; mod may change the config.
func newEnv(t *testing.T, mod func(*video.Config)) *env {
	t.Helper()
	nativetest.FFmpeg(t)
	sb := sandboxtest.New(t, nil)
	ws, err := workspace.Open(workspace.Config{Dir: sandboxtest.Dir(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := video.Config{
		Runner: sb, Spaces: ws,
		Limits: sandbox.Limits{Timeout: 2 * time.Minute},
		Clock:  clock.NewFake(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)),
	}
	if mod != nil {
		mod(&cfg)
	}
	e := &env{reg: tools.NewRegistry(), ws: ws}
	for _, tl := range video.Tools(cfg) {
		if err := e.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	if e.alice, err = ws.UserDir("wecom:alice"); err != nil {
		t.Fatal(err)
	}
	return e
}

// call runs tool as user (on wecom) with args.
func (e *env) call(t *testing.T, user, tool string, args any) (string, error) {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return e.reg.Run(context.Background(), tool, tools.Call{Args: b, User: user, Channel: "wecom"})
}

// ok runs tool as alice and fails the test on an error.
func (e *env) ok(t *testing.T, tool string, args any) string {
	t.Helper()
	out, err := e.call(t, "alice", tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	t.Logf("%s: %s", tool, out)
	return out
}

// ffmpeg runs ffmpeg on the host (fixtures only) in dir.
func ffmpeg(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

// clip writes a 320x240 test clip of secs seconds, with a tone unless
// silent, at dir/name.
func clip(t *testing.T, dir, name string, secs int, silent bool) {
	t.Helper()
	args := []string{"-f", "lavfi", "-i", "testsrc=size=320x240:rate=25"}
	if !silent {
		args = append(args, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100")
	}
	args = append(args, "-t", strconv.Itoa(secs), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p")
	if !silent {
		args = append(args, "-c:a", "aac")
	}
	ffmpeg(t, dir, append(args, "file:"+name)...)
}

// probed is what the test's own ffprobe says of a file.
type probed struct {
	duration      float64
	video, audio  bool
	width, height int
}

func probe(t *testing.T, file string) probed {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-of", "json", "-show_entries",
		"format=duration:stream=codec_type,width,height", "file:"+file).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", file, err)
	}
	var r struct {
		Streams []struct {
			CodecType     string `json:"codec_type"`
			Width, Height int
		}
		Format struct{ Duration string }
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	var p probed
	p.duration, _ = strconv.ParseFloat(r.Format.Duration, 64)
	for _, s := range r.Streams {
		switch s.CodecType {
		case "video":
			p.video, p.width, p.height = true, s.Width, s.Height
		case "audio":
			p.audio = true
		}
	}
	return p
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s: duration %.3f s, want %.3f ± %.1f", what, got, want, tol)
	}
}

func TestTrim(t *testing.T) {
	e := newEnv(t, nil)
	clip(t, e.alice, "clip.mp4", 6, false)
	if err := os.MkdirAll(filepath.Join(e.alice, "in"), 0o700); err != nil {
		t.Fatal(err)
	}
	clip(t, filepath.Join(e.alice, "in"), "-i.mp4", 4, false)

	out := e.ok(t, "trim_video", map[string]any{"path": "clip.mp4", "start": "1.0", "end": "3.5"})
	for _, want := range []string{"clip_trimmed.mp4", "2.5", "320x240", "send_video"} {
		if !strings.Contains(out, want) {
			t.Errorf("result %q does not say %q", out, want)
		}
	}
	p := probe(t, filepath.Join(e.alice, "clip_trimmed.mp4"))
	near(t, "trim", p.duration, 2.5, 0.2)
	if !p.video || !p.audio {
		t.Errorf("trimmed clip: video %v audio %v, want both", p.video, p.audio)
	}

	// The same again: a new name, the first result untouched.
	e.ok(t, "trim_video", map[string]any{"path": "clip.mp4", "start": "0:00:01", "end": "0:02.5"})
	near(t, "second trim", probe(t, filepath.Join(e.alice, "clip_trimmed_2.mp4")).duration, 1.5, 0.2)
	near(t, "first trim kept", probe(t, filepath.Join(e.alice, "clip_trimmed.mp4")).duration, 2.5, 0.2)

	// A name like an ffmpeg option is a file like any other, and the
	// output goes into a new folder.
	out = e.ok(t, "trim_video", map[string]any{"path": "in/-i.mp4", "start": "0", "end": "1", "output": "cuts/-y.mp4"})
	if !strings.Contains(out, "cuts/-y.mp4") {
		t.Errorf("result %q does not name cuts/-y.mp4", out)
	}
	near(t, "-i.mp4", probe(t, filepath.Join(e.alice, "cuts", "-y.mp4")).duration, 1, 0.2)

	// An input in shared/: the result goes to alice's folder.
	shared := filepath.Join(e.ws.Dir(), workspace.SharedDir)
	clip(t, shared, "team.mp4", 3, true)
	e.ok(t, "trim_video", map[string]any{"path": "shared/team.mp4", "start": "1", "end": "2"})
	if p := probe(t, filepath.Join(e.alice, "team_trimmed.mp4")); p.audio || !p.video {
		t.Errorf("trim of a silent clip: video %v audio %v, want video only", p.video, p.audio)
	}
	assertNoTemps(t, e.alice)
}

// assertNoTemps fails when a job left a temporary file in dir.
func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".video-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestErrors(t *testing.T) {
	e := newEnv(t, func(c *video.Config) { c.MaxInput = 5 * time.Second; c.MaxOutputMB = 1 })
	clip(t, e.alice, "clip.mp4", 4, false)
	clip(t, e.alice, "long.mp4", 6, true)
	// Noise does not compress: re-encoded, 4 s are over 1 MB.
	ffmpeg(t, e.alice, "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25,noise=alls=100:allf=t", "-t", "4",
		"-c:v", "libx264", "-preset", "ultrafast", "-crf", "10", "-pix_fmt", "yuv420p", "file:noisy.mp4")
	ffmpeg(t, e.alice, "-f", "lavfi", "-i", "testsrc=size=64x64:rate=1", "-frames:v", "1", "file:still.png")
	if err := syscall.Mkfifo(filepath.Join(e.alice, "pipe.mp4"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.alice, "notes.txt"), []byte("not a video\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.alice, "notes.mp4"), []byte("not a video either\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.alice, "taken.mp4"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	bob, err := e.ws.UserDir("wecom:bob")
	if err != nil {
		t.Fatal(err)
	}
	clip(t, bob, "secret.mp4", 2, false)
	if err := os.WriteFile(filepath.Join(e.ws.Dir(), "SOUL.md"), []byte("you are"), 0o600); err != nil {
		t.Fatal(err)
	}
	bobAbs := filepath.Join(bob, "secret.mp4")
	bobRel := "../" + filepath.Base(bob) + "/secret.mp4"
	if err := os.Symlink(bobAbs, filepath.Join(e.alice, "link.mp4")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(bob)+"/secret.mp4", filepath.Join(e.alice, "rel-link.mp4")); err != nil {
		t.Fatal(err)
	}

	trim := func(path, start, end, output string) map[string]any {
		a := map[string]any{"path": path, "start": start, "end": end}
		if output != "" {
			a["output"] = output
		}
		return a
	}
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"end before start", "trim_video", trim("clip.mp4", "3", "1", ""), "must be after start"},
		{"start past the end", "trim_video", trim("clip.mp4", "10", "11", ""), "past the end"},
		{"end past the end", "trim_video", trim("clip.mp4", "1", "0:09", ""), "past the end"},
		{"bad time", "trim_video", trim("clip.mp4", "NaN", "2", ""), "not a time"},
		{"negative time", "trim_video", trim("clip.mp4", "-1", "2", ""), "not a time"},
		{"minutes over 59", "trim_video", trim("clip.mp4", "0", "1:75", ""), "below 60"},
		{"longer than MaxInput", "trim_video", trim("long.mp4", "0", "1", ""), "at most 5 s"},
		{"other user's file by absolute path", "trim_video", trim(bobAbs, "0", "1", ""), "no such file"},
		{"other user's file by ..", "trim_video", trim(bobRel, "0", "1", ""), "outside the workspace"},
		{"output in shared", "trim_video", trim("clip.mp4", "0", "1", "shared/out.mp4"), "read-only"},
		{"prompt file as input", "trim_video", trim("SOUL.md", "0", "1", ""), "not visible"},
		{"prompt file as output", "trim_video", trim("clip.mp4", "0", "1", "SOUL.md"), "not visible"},
		{"output with ..", "trim_video", trim("clip.mp4", "0", "1", "../x.mp4"), "outside the workspace"},
		{"link to the other user's file", "trim_video", trim("link.mp4", "0", "1", ""), "link.mp4"},
		{"relative link out", "trim_video", trim("rel-link.mp4", "0", "1", ""), "rel-link.mp4"},
		{"fifo", "trim_video", trim("pipe.mp4", "0", "1", ""), "pipe.mp4"},
		{"output too large", "trim_video", trim("noisy.mp4", "0", "4", ""), "larger than 1 MB"},
		{"output exists", "trim_video", trim("clip.mp4", "0", "1", "taken.mp4"), "already exists"},
		{"output not a video name", "trim_video", trim("clip.mp4", "0", "1", "out.avi"), "must end in .mp4"},
		{"text file", "trim_video", trim("notes.txt", "0", "1", ""), "not a video, sound or picture file"},
		{"text file named .mp4", "trim_video", trim("notes.mp4", "0", "1", ""), "not a video, sound or picture file"},
		{"picture", "trim_video", trim("still.png", "0", "1", ""), "a picture, not a video"},
		{"missing file", "trim_video", trim("nothing.mp4", "0", "1", ""), "no such file"},
		{"bgm over bob's music", "add_bgm", map[string]any{"video": "clip.mp4", "audio": bobAbs, "mode": "mix"}, "no such file"},
		{"bgm bad mode", "add_bgm", map[string]any{"video": "clip.mp4", "audio": "clip.mp4", "mode": "blend"}, "must be one of"},
		{"bgm loud", "add_bgm", map[string]any{"video": "clip.mp4", "audio": "clip.mp4", "mode": "mix", "volume": 1e300}, "between 0 and 2"},
		{"bgm negative volume", "add_bgm", map[string]any{"video": "clip.mp4", "audio": "clip.mp4", "mode": "mix", "volume": -0.5}, "between 0 and 2"},
		{"bgm text as music", "add_bgm", map[string]any{"video": "clip.mp4", "audio": "notes.txt", "mode": "replace"}, "notes.txt is not a video"},
		{"slideshow of nothing", "generate_video", map[string]any{"images": []string{}}, "1 to 50"},
		{"slideshow too many", "generate_video", map[string]any{"images": make([]string, 51)}, "1 to 50"},
		{"slideshow too fast", "generate_video", map[string]any{"images": []string{"a.png"}, "seconds_per_image": 0.1}, "between 0.5 and 60"},
		{"slideshow too long", "generate_video", map[string]any{"images": []string{"a.png", "b.png"}, "seconds_per_image": 3}, "at most 5 s"},
		{"slideshow narration too long", "generate_video", map[string]any{"images": []string{"a.png"}, "narration": strings.Repeat("字", 2001)}, "at most 2000"},
		{"slideshow text picture", "generate_video", map[string]any{"images": []string{"notes.txt"}, "seconds_per_image": 1}, "notes.txt is not a video"},
		{"slideshow empty path", "generate_video", map[string]any{"images": []string{""}, "seconds_per_image": 1}, "images[0] is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := e.call(t, "alice", c.tool, c.args)
			if err == nil {
				t.Fatalf("no error; result %q", out)
			}
			var pe *tools.PanicError
			if errors.As(err, &pe) {
				t.Fatalf("panic: %v\n%s", pe, pe.Stack)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			t.Logf("%v", err)
		})
	}
	if b, _ := os.ReadFile(filepath.Join(e.alice, "taken.mp4")); string(b) != "keep me" {
		t.Errorf("taken.mp4 was changed: %q", b)
	}
	entries, _ := os.ReadDir(e.alice)
	for _, d := range entries {
		if strings.Contains(d.Name(), "_trimmed") || strings.Contains(d.Name(), "_bgm") {
			t.Errorf("a failed call left %s", d.Name())
		}
	}
	assertNoTemps(t, e.alice)

	// Bob's own call reads his file: the refusal above was about alice.
	if _, err := e.call(t, "bob", "trim_video", trim("secret.mp4", "0", "1", "")); err != nil {
		t.Errorf("bob trimming his own file: %v", err)
	}
}

func TestBGM(t *testing.T) {
	e := newEnv(t, nil)
	clip(t, e.alice, "clip.mp4", 6, false)
	clip(t, e.alice, "silent.mp4", 4, true)
	ffmpeg(t, e.alice, "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000", "-t", "2.5", "-ac", "2", "-c:a", "aac", "file:music.m4a")

	for _, c := range []struct {
		name  string
		args  map[string]any
		file  string
		want  float64
		saysa string
	}{
		{"replace", map[string]any{"video": "clip.mp4", "audio": "music.m4a", "mode": "replace"}, "clip_bgm.mp4", 6, "as its sound"},
		{"mix", map[string]any{"video": "clip.mp4", "audio": "music.m4a", "mode": "mix", "volume": 0.5, "output": "mixed.mp4"}, "mixed.mp4", 6, "volume 0.5"},
		{"mix on a silent video", map[string]any{"video": "silent.mp4", "audio": "music.m4a", "mode": "mix"}, "silent_bgm.mp4", 4, "no sound of its own"},
		{"music from a video", map[string]any{"video": "silent.mp4", "audio": "clip.mp4", "mode": "replace", "output": "x/y.mkv"}, "x/y.mkv", 4, "send_file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := e.ok(t, "add_bgm", c.args)
			if !strings.Contains(out, c.saysa) {
				t.Errorf("result %q does not say %q", out, c.saysa)
			}
			p := probe(t, filepath.Join(e.alice, c.file))
			if !p.video || !p.audio {
				t.Errorf("%s: video %v audio %v, want both", c.file, p.video, p.audio)
			}
			near(t, c.file, p.duration, c.want, 0.2)
		})
	}
	assertNoTemps(t, e.alice)
}

func TestGenerate(t *testing.T) {
	e := newEnv(t, nil)
	if err := os.Mkdir(filepath.Join(e.alice, "pics"), 0o700); err != nil {
		t.Fatal(err)
	}
	pics := filepath.Join(e.alice, "pics")
	ffmpeg(t, pics, "-f", "lavfi", "-i", "testsrc=size=640x480:rate=1", "-frames:v", "1", "file:a 100%.png")
	ffmpeg(t, pics, "-f", "lavfi", "-i", "testsrc=size=301x500:rate=1", "-frames:v", "1", "file:b.jpg")
	ffmpeg(t, pics, "-f", "lavfi", "-i", "smptebars=size=1920x1080:rate=1", "-frames:v", "1", "file:c.png")
	images := []string{"pics/a 100%.png", "pics/b.jpg", "pics/c.png"}

	out := e.ok(t, "generate_video", map[string]any{"images": images, "seconds_per_image": 1.5})
	if !strings.Contains(out, "pics/slideshow_20260302-093000.mp4") {
		t.Errorf("result %q does not name pics/slideshow_20260302-093000.mp4", out)
	}
	p := probe(t, filepath.Join(pics, "slideshow_20260302-093000.mp4"))
	near(t, "3 pictures at 1.5 s", p.duration, 4.5, 0.2)
	if p.width != 1280 || p.height != 720 || p.audio {
		t.Errorf("slideshow: %dx%d audio %v, want 1280x720 without audio", p.width, p.height, p.audio)
	}

	t.Run("narration", func(t *testing.T) {
		nativetest.EspeakNG(t)
		text := "Welcome to the office. These are the pictures of our trip."
		wav := filepath.Join(t.TempDir(), "n.wav")
		if out, err := exec.Command("espeak-ng", "-v", "en", "-w", wav, text).CombinedOutput(); err != nil {
			t.Fatalf("espeak-ng: %v\n%s", err, out)
		}
		speech := probe(t, wav).duration
		out := e.ok(t, "generate_video", map[string]any{"images": images, "narration": text, "output": "narrated.mp4"})
		if !strings.Contains(out, "of narration") {
			t.Errorf("result %q does not say it is narrated", out)
		}
		p := probe(t, filepath.Join(e.alice, "narrated.mp4"))
		near(t, "narrated", p.duration, speech, 0.2)
		if !p.audio || !p.video {
			t.Errorf("narrated: video %v audio %v, want both", p.video, p.audio)
		}

		// Chinese text, one picture from shared/: the result lands in
		// alice's folder under the next free default name.
		shared := filepath.Join(e.ws.Dir(), workspace.SharedDir)
		ffmpeg(t, shared, "-f", "lavfi", "-i", "testsrc=size=200x200:rate=1", "-frames:v", "1", "file:logo.png")
		e.ok(t, "generate_video", map[string]any{"images": []string{"shared/logo.png"}, "narration": "你好，欢迎。"})
		if p := probe(t, filepath.Join(e.alice, "slideshow_20260302-093000.mp4")); !p.audio || p.duration < 0.5 {
			t.Errorf("chinese narration: audio %v duration %.2f", p.audio, p.duration)
		}
	})
	assertNoTemps(t, e.alice)
}

// limitRunner is a Runner whose every run ends over a limit.
type limitRunner struct{ res sandbox.Result }

func (r limitRunner) Run(context.Context, sandbox.Spec) (*sandbox.Result, error) {
	res := r.res
	return &res, nil
}

// TestLimitSaid: a run stopped by the sandbox says which limit.
func TestLimitSaid(t *testing.T) {
	ws, err := workspace.Open(workspace.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := ws.UserDir("wecom:alice")
	if err := os.WriteFile(filepath.Join(dir, "clip.mp4"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		res  sandbox.Result
		want string
	}{
		{sandbox.Result{Exit: -1, Limit: sandbox.LimitTime, Detail: "5m0s wall time", Stderr: []byte("frame=  10\n")}, "took too long (5m0s wall time)"},
		{sandbox.Result{Exit: -1, Limit: sandbox.LimitCPU, Detail: "600 CPU seconds"}, "too much CPU time (600 CPU seconds)"},
		{sandbox.Result{Exit: 1, Stderr: []byte("file:/work/clip.mp4: Invalid data found when processing input\n")}, "failed (exit status 1): clip.mp4: Invalid data"},
	} {
		reg := tools.NewRegistry()
		for _, tl := range video.Tools(video.Config{Runner: limitRunner{c.res}, Spaces: ws}) {
			_ = reg.Register(tl)
		}
		_, err := reg.Run(context.Background(), "trim_video", tools.Call{Args: json.RawMessage(`{"path":"clip.mp4","start":"0","end":"1"}`), User: "alice", Channel: "wecom"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one saying %q", err, c.want)
		}
	}
}

// TestNotConfigured: tools built without a sandbox say so.
func TestNotConfigured(t *testing.T) {
	args := map[string]string{
		"trim_video":     `{"path":"a.mp4","start":"0","end":"1"}`,
		"add_bgm":        `{"video":"a.mp4","audio":"b.mp3","mode":"mix"}`,
		"generate_video": `{"images":["a.png"]}`,
	}
	for _, tl := range video.Tools(video.Config{}) {
		_, err := tl.Handler(context.Background(), tools.Call{Args: json.RawMessage(args[tl.Name]), User: "alice", Channel: "wecom"})
		if err == nil || !strings.Contains(err.Error(), "not set up") {
			t.Errorf("%s without a sandbox: error %v, want one saying it is not set up", tl.Name, err)
		}
	}
}
