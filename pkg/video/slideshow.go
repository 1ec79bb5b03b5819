package video

import (
	"context"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// SlideshowArgs are generate_video's arguments.
type SlideshowArgs struct {
	Images          []string `json:"images"`
	Narration       string   `json:"narration,omitempty" desc:"text spoken over the pictures, at most 2000 characters"`
	SecondsPerImage *float64 `json:"seconds_per_image,omitempty" desc:"seconds per picture, 0.5-60; default: spread over the narration, or 3"`
	Output          string   `json:"output,omitempty"`
}

// Bounds and shape of a slideshow.
const (
	maxImages        = 50
	maxNarration     = 2000 // characters
	minPerImage      = 0.5
	maxPerImage      = 60.0
	defaultPerImage  = 3.0
	slideFPS         = 25
	slideW, slideH   = 1280, 720
	maxPicturePixels = 100_000_000
)

func (k *kit) slideshowTool() tools.Tool {
	return tools.Tool{
		Name: "generate_video",
		Description: fmt.Sprintf("Make a 1280x720 slideshow video from 1 to %d pictures, optionally with spoken narration (at most %s). Default output slideshow_<date-time>.mp4 in your folder.",
			maxImages, fmtLimit(k.MaxInput)) + pathsNote,
		Schema: tools.SchemaWith[SlideshowArgs](map[string]string{
			"images": fmt.Sprintf("the pictures in order, 1 to %d", maxImages),
			"output": outputNote,
		}),
		Handler: k.slideshow,
	}
}

func (k *kit) slideshow(ctx context.Context, call tools.Call) (string, error) {
	const tool = "generate_video"
	a, err := tools.Decode[SlideshowArgs](call.Args)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", tools.ErrBadArgs, tool, err)
	}
	n := len(a.Images)
	if n == 0 || n > maxImages {
		return "", argErr(tool, "give 1 to %d pictures in images, got %d", maxImages, n)
	}
	per := defaultPerImage
	if a.SecondsPerImage != nil {
		per = *a.SecondsPerImage
		if !(per >= minPerImage && per <= maxPerImage) {
			return "", argErr(tool, "seconds_per_image must be between %g and %g, got %v", minPerImage, maxPerImage, per)
		}
	}
	text := strings.TrimSpace(a.Narration)
	if c := utf8.RuneCountInString(text); c > maxNarration {
		return "", argErr(tool, "narration is %d characters; at most %d (make it shorter, or make several videos)", c, maxNarration)
	}
	if strings.IndexByte(text, 0) >= 0 {
		return "", argErr(tool, "narration contains a NUL character")
	}
	if text == "" || a.SecondsPerImage != nil {
		if total := float64(n) * per; total > k.MaxInput.Seconds() {
			return "", argErr(tool, "%d pictures at %g s each make %s; at most %s", n, per, fmtDur(total), fmtLimit(k.MaxInput))
		}
	}
	j, err := k.begin(tool, call)
	if err != nil {
		return "", err
	}
	defer j.close()
	ins := make([]string, n)
	for i, p := range a.Images {
		if ins[i], err = j.input(fmt.Sprintf("images[%d]", i), p); err != nil {
			return "", err
		}
	}
	def := path.Join(folderOf(ins[0]), "slideshow_"+k.Clock.Now().Format("20060102-150405")+".mp4")
	out, err := j.output(a.Output, def)
	if err != nil {
		return "", err
	}
	ms, err := j.probe(ctx, ins...)
	if err != nil {
		return "", err
	}
	for i, m := range ms {
		v, ok := m.video()
		if !ok {
			return "", fmt.Errorf("%s: %s is not a picture", tool, userPath(ins[i]))
		}
		if v.Width*v.Height > maxPicturePixels {
			return "", fmt.Errorf("%s: %s is %dx%d, more than the %d megapixels this tool takes; make it smaller first",
				tool, userPath(ins[i]), v.Width, v.Height, maxPicturePixels/1_000_000)
		}
	}

	var wav string
	speech := 0.0
	if text != "" {
		if wav, speech, err = j.speak(ctx, text); err != nil {
			return "", err
		}
	}
	frames := slideFrames(n, a.SecondsPerImage, speech)
	total := 0
	for _, f := range frames {
		total += f
	}
	length := float64(total) / slideFPS
	if length > k.MaxInput.Seconds() {
		return "", fmt.Errorf("%s: the narration lasts %s; a slideshow may last at most %s. Shorten the text", tool, fmtDur(speech), fmtLimit(k.MaxInput))
	}

	tmp, err := j.prepare(out)
	if err != nil {
		return "", err
	}
	// The pictures are fitted into the frame one at a time first (all
	// decoded at once, fifty photos would not fit in the memory limit),
	// then put together; one run, so the fitted copies stay in its /tmp.
	argv := append([]string{"/bin/sh", "-c", slideScript, "sh", strconv.Itoa(n)}, ins...)
	argv = append(argv, ffmpegArgs()...)
	for i := range ins {
		argv = append(argv, "-threads", "1", "-i", fmt.Sprintf("file:/tmp/slide%d.jpg", i))
	}
	if wav != "" {
		argv = append(argv, "-i", "file:"+wav)
	}
	argv = append(argv, "-filter_complex", slideGraph(frames, wav != "", length), "-map", "[v]")
	if wav != "" {
		argv = append(argv, "-map", "[a]")
	}
	argv = append(argv, "-r", fmt.Sprint(slideFPS))
	argv = append(argv, x264...)
	argv = append(argv, "-tune", "stillimage")
	if wav != "" {
		argv = append(argv, aac...)
	}
	argv = append(argv, "-t", ffTime(length))
	argv = append(argv, j.outputArgs(out, tmp)...)
	if _, err := j.run(ctx, "ffmpeg", j.limits(), nil, argv...); err != nil {
		return "", err
	}
	rel, om, err := j.finish(ctx, tmp, out, length)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("a slideshow of %d picture", n)
	if n > 1 {
		what += "s"
	}
	if wav != "" {
		what += fmt.Sprintf(" with %s of narration", fmtDur(speech))
	}
	return report(rel, om, what), nil
}

// folderOf is the folder (relative to the caller's) a result made from
// the input at the sandbox path in goes to: the input's, or the top of
// the caller's folder for an input in shared/.
func folderOf(in string) string {
	if rel, ok := strings.CutPrefix(in, workspace.WorkMount+"/"); ok {
		return path.Dir(rel)
	}
	return ""
}

// slideFrames is how many frames each of n pictures shows: per given, or
// the speech's length spread evenly (at least a frame each), or the
// default; with both, the last picture stays until the speech ends.
func slideFrames(n int, per *float64, speech float64) []int {
	frames := make([]int, n)
	need := int(math.Ceil(speech * slideFPS))
	if per == nil && speech > 0 {
		total := max(need, n)
		for i := range frames {
			frames[i] = total*(i+1)/n - total*i/n
		}
		return frames
	}
	each := defaultPerImage
	if per != nil {
		each = *per
	}
	// Rounded where each picture ends, so the whole is n*each to a frame.
	sum := 0
	for i := range frames {
		frames[i] = int(math.Round(float64(i+1)*each*slideFPS)) - sum
		sum += frames[i]
	}
	if need > sum {
		frames[n-1] += need - sum
	}
	return frames
}

// slideScript fits each of the first $1 pictures named after it into the
// frame on black (/tmp/slide0.jpg...), then runs the command that
// follows them. Paths and command are arguments, never part of the
// script.
var slideScript = fmt.Sprintf(`n=$1; shift; i=0
while [ "$i" -lt "$n" ]; do
  if ! ffmpeg -nostdin -hide_banner -loglevel error -n -threads 2 -i "file:$1" -frames:v 1 -vf '%s' -q:v 2 "file:/tmp/slide$i.jpg"; then
    printf 'picture %%s could not be used\n' "$1" >&2; exit 1
  fi
  shift; i=$((i+1))
done
exec "$@"`, fitFilter)

// fitFilter scales a picture to fit the frame and pads it with black.
var fitFilter = fmt.Sprintf("scale=%d:%d:force_original_aspect_ratio=decrease,pad=%d:%d:(ow-iw)/2:(oh-ih)/2:color=black,setsar=1",
	slideW, slideH, slideW, slideH)

// slideGraph is the filter graph of a slideshow of fitted pictures: each
// repeated for its frames, one after another ([v]), and the narration
// (input n, when speech) padded with silence to length ([a]).
func slideGraph(frames []int, speech bool, length float64) string {
	var b strings.Builder
	for i, f := range frames {
		fmt.Fprintf(&b, "[%d:v]format=yuv420p,loop=loop=-1:size=1,fps=%d,trim=end_frame=%d,setpts=PTS-STARTPTS[v%d];", i, slideFPS, f, i)
	}
	for i := range frames {
		fmt.Fprintf(&b, "[v%d]", i)
	}
	fmt.Fprintf(&b, "concat=n=%d:v=1:a=0[v]", len(frames))
	if speech {
		fmt.Fprintf(&b, ";[%d:a]apad=whole_dur=%s[a]", len(frames), ffTime(length))
	}
	return b.String()
}

// speak has espeak-ng say text into a temporary WAV file in the caller's
// folder (the text goes on stdin, never on a command line) and returns
// its sandbox path and length in seconds.
func (j *job) speak(ctx context.Context, text string) (string, float64, error) {
	wav, _ := j.temp("", ".wav")
	if _, err := j.run(ctx, "espeak-ng", j.probeLimits(), []byte(text),
		"espeak-ng", "-v", voiceFor(text), "-w", wav, "--stdin"); err != nil {
		return "", 0, err
	}
	ms, err := j.probe(ctx, wav)
	if err != nil {
		return "", 0, err
	}
	d := ms[0].duration()
	if d <= 0 {
		return "", 0, fmt.Errorf("%s: speech synthesis made no sound of the narration; write it in words", j.tool)
	}
	return wav, d, nil
}

// voiceFor picks the espeak-ng voice of text by its script: kana is
// Japanese, Hangul Korean, other Han characters Mandarin, Cyrillic
// Russian, anything else English.
func voiceFor(text string) string {
	var han, kana, hangul, cyrillic, latin int
	for _, r := range text {
		switch {
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			kana++
		case unicode.Is(unicode.Hangul, r):
			hangul++
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.Is(unicode.Cyrillic, r):
			cyrillic++
		case unicode.Is(unicode.Latin, r):
			latin++
		}
	}
	switch {
	case kana > 0 && kana+han >= latin:
		return "ja"
	case hangul > 0 && hangul >= latin:
		return "ko"
	case han > 0 && han >= latin/4:
		return "cmn"
	case cyrillic > latin:
		return "ru"
	}
	return "en"
}
