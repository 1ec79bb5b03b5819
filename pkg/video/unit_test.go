package video

import (
	"math"
	"slices"
	"testing"
)

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"12.5", 12.5, true},
		{" 3 ", 3, true},
		{"0", 0, true},
		{"1:02", 62, true},
		{"01:02.25", 62.25, true},
		{"1:00:00", 3600, true},
		{"00:00:03.5", 3.5, true},
		{"1:60", 0, false},
		{"60:00:00", 0, false},
		{"99:59:59", 0, false}, // past a day
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"0x10", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1:2:3:4", 0, false},
		{"", 0, false},
		{"12s", 0, false},
		{"９", 0, false}, // a full-width digit
	} {
		got, err := parseTime(c.in)
		if (err == nil) != c.ok || (c.ok && math.Abs(got-c.want) > 1e-9) {
			t.Errorf("parseTime(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// FuzzParseTime: whatever the model sends is a finite time within a day
// that ffTime writes plainly, or an error.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"12.5", "1:02", "00:01:02.250", "NaN", "-0", "1e308", "23:59:59.999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseTime(s)
		if err != nil {
			return
		}
		if math.IsNaN(v) || v < 0 || v > maxTimecode {
			t.Fatalf("parseTime(%q) = %v", s, v)
		}
		for _, c := range ffTime(v) {
			if (c < '0' || c > '9') && c != '.' {
				t.Fatalf("ffTime(%v) = %q", v, ffTime(v))
			}
		}
	})
}

func TestSlideFrames(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name   string
		n      int
		per    *float64
		speech float64
		want   []int
	}{
		{"default", 2, nil, 0, []int{75, 75}},
		{"1.5 s each", 3, f(1.5), 0, []int{38, 37, 38}},
		{"spread over speech", 3, nil, 4, []int{33, 33, 34}},
		{"speech shorter than the pictures", 3, nil, 0.04, []int{1, 1, 1}},
		{"given, speech longer", 2, f(1), 3, []int{25, 50}},
		{"given, speech shorter", 2, f(1), 1, []int{25, 25}},
	} {
		if got := slideFrames(c.n, c.per, c.speech); !slices.Equal(got, c.want) {
			t.Errorf("%s: slideFrames = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestVoiceFor(t *testing.T) {
	for text, want := range map[string]string{
		"Hello there":     "en",
		"你好，欢迎来到办公室":      "cmn",
		"这是我们的 WeChat 视频": "cmn",
		"こんにちは、世界":        "ja",
		"안녕하세요":           "ko",
		"Привет, мир":     "ru",
		"Bonjour à tous":  "en",
		"":                "en",
	} {
		if got := voiceFor(text); got != want {
			t.Errorf("voiceFor(%q) = %s, want %s", text, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	stderr := []byte("noise\n[h264 @ 0x1] error\nfile:/work/a b.mp4: Invalid data found\n\nfile:/shared/x.mp3: No such file\n")
	if got, want := lastLines(stderr, ""), ": noise | [h264 @ 0x1] error | a b.mp4: Invalid data found | shared/x.mp3: No such file"; got != want {
		t.Errorf("lastLines = %q, want %q", got, want)
	}
	if got, want := lastLines(stderr, "/shared/x.mp3"), ": shared/x.mp3: No such file"; got != want {
		t.Errorf("lastLines(must) = %q, want %q", got, want)
	}
	long := make([]byte, 0, 100_000)
	for range 5000 {
		long = append(long, "a line of ffmpeg noise that goes on\n"...)
	}
	if got := lastLines(long, ""); len(got) > summaryTotalMax+10 {
		t.Errorf("lastLines of a long log is %d bytes", len(got))
	}
}

func TestDefaultName(t *testing.T) {
	for in, want := range map[string]string{
		"/work/clip.mp4":        "clip_x.mp4",
		"/work/a/b/VID 1.MOV":   "a/b/VID 1_x.mp4",
		"/shared/team/demo.mkv": "demo_x.mp4",
		"/work/.mp4":            "video_x.mp4",
		"/work/-i.mp4":          "-i_x.mp4",
	} {
		if got := defaultName(in, "_x"); got != want {
			t.Errorf("defaultName(%q) = %q, want %q", in, got, want)
		}
	}
}
