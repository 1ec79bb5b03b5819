package video

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"agent/pkg/tools"
)

// TrimArgs are trim_video's arguments.
type TrimArgs struct {
	Path   string `json:"path"`
	Start  string `json:"start" desc:"where the cut begins: seconds (12.5) or [hh:]mm:ss[.ms] (1:02.5)"`
	End    string `json:"end" desc:"where the cut ends, after start and within the video: seconds or [hh:]mm:ss[.ms]"`
	Output string `json:"output,omitempty"`
}

// endSlack is how far past a clip's length end may point (a frame or
// two of rounding in what the user read off a player); it is cut back.
const endSlack = 0.1

func (k *kit) trimTool() tools.Tool {
	return tools.Tool{
		Name: "trim_video",
		Description: fmt.Sprintf("Cut a video to the part from start to end (frame-accurate: the part is re-encoded as H.264/AAC). The input may be at most %s long. Without output the result is <name>_trimmed.mp4 beside the input (in your folder when the input is in shared/).",
			fmtLimit(k.MaxInput)) + pathsNote,
		Schema: tools.SchemaWith[TrimArgs](map[string]string{
			"path":   "the video to cut",
			"output": outputNote,
		}),
		Handler: k.trim,
	}
}

func (k *kit) trim(ctx context.Context, call tools.Call) (string, error) {
	const tool = "trim_video"
	a, err := tools.Decode[TrimArgs](call.Args)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", tools.ErrBadArgs, tool, err)
	}
	start, err := parseTime(a.Start)
	if err != nil {
		return "", argErr(tool, "start %v", err)
	}
	end, err := parseTime(a.End)
	if err != nil {
		return "", argErr(tool, "end %v", err)
	}
	if end <= start {
		return "", argErr(tool, "end (%s) must be after start (%s)", strings.TrimSpace(a.End), strings.TrimSpace(a.Start))
	}
	j, err := k.begin(tool, call)
	if err != nil {
		return "", err
	}
	defer j.close()
	in, err := j.input("path", a.Path)
	if err != nil {
		return "", err
	}
	out, err := j.output(a.Output, defaultName(in, "_trimmed"))
	if err != nil {
		return "", err
	}
	ms, err := j.probe(ctx, in)
	if err != nil {
		return "", err
	}
	m := ms[0]
	v, err := j.clip(in, m)
	if err != nil {
		return "", err
	}
	dur := m.duration()
	switch {
	case start >= dur:
		return "", argErr(tool, "start (%s) is past the end of %s, which is %s long", strings.TrimSpace(a.Start), userPath(in), fmtDur(dur))
	case end > dur+endSlack:
		return "", argErr(tool, "end (%s) is past the end of %s, which is %s long", strings.TrimSpace(a.End), userPath(in), fmtDur(dur))
	}
	end = min(end, dur)

	tmp, err := j.prepare(out)
	if err != nil {
		return "", err
	}
	argv := ffmpegArgs()
	argv = append(argv, "-threads", "2", "-ss", ffTime(start), "-t", ffTime(end-start), "-i", "file:"+in,
		"-map", "0:"+strconv.Itoa(v.Index))
	if au, ok := m.audio(); ok {
		argv = append(argv, "-map", "0:"+strconv.Itoa(au.Index))
	}
	argv = append(argv, "-vf", evenSize+",format=yuv420p")
	argv = append(argv, x264...)
	argv = append(argv, aac...)
	argv = append(argv, j.outputArgs(out, tmp)...)
	if _, err := j.run(ctx, "ffmpeg", j.limits(), nil, argv...); err != nil {
		return "", err
	}
	rel, om, err := j.finish(ctx, tmp, out, end-start)
	if err != nil {
		return "", err
	}
	return report(rel, om, fmt.Sprintf("%s from %s s to %s s", userPath(in), ffTime(start), ffTime(end))), nil
}

// clip checks that m, probed at in, is a video within the input bound
// and returns its video stream.
func (j *job) clip(in string, m *media) (stream, error) {
	v, ok := m.video()
	if !ok {
		return v, fmt.Errorf("%s: %s has no video in it", j.tool, userPath(in))
	}
	if isPicture(m) {
		return v, fmt.Errorf("%s: %s is a picture, not a video", j.tool, userPath(in))
	}
	dur := m.duration()
	if dur <= 0 {
		return v, fmt.Errorf("%s: ffprobe cannot tell how long %s is; convert it to .mp4 first", j.tool, userPath(in))
	}
	if dur > j.k.MaxInput.Seconds() {
		return v, fmt.Errorf("%s: %s is %s long; this tool takes videos of at most %s. Trim it first, or use a shorter one",
			j.tool, userPath(in), fmtDur(dur), fmtLimit(j.k.MaxInput))
	}
	return v, nil
}

// isPicture reports whether m is a still picture (ffmpeg's image
// demuxers).
func isPicture(m *media) bool {
	f := m.Format.FormatName
	return f == "image2" || strings.HasSuffix(f, "_pipe")
}

// evenSize makes both sides even (H.264 in yuv420p needs it).
const evenSize = "scale=trunc(iw/2)*2:trunc(ih/2)*2"

// x264 and aac are the encoder options of every re-encode.
var (
	x264 = []string{"-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p"}
	aac  = []string{"-c:a", "aac", "-b:a", "128k"}
)

// ffmpegArgs starts an ffmpeg command line: quiet but for errors, no
// stdin, never overwriting, two filter threads.
func ffmpegArgs() []string {
	return []string{"ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-n",
		"-filter_threads", "2", "-filter_complex_threads", "2"}
}

// outputArgs end an ffmpeg command line writing tmp for target t: two
// encoder threads, the size bound, the container of t's extension.
func (j *job) outputArgs(t target, tmp string) []string {
	ext := strings.ToLower(path.Ext(t.rel))
	a := []string{"-map_chapters", "-1", "-threads", "2", "-fs", strconv.FormatInt(j.k.maxOutputBytes(), 10), "-f", outputExts[ext]}
	if ext != ".mkv" {
		a = append(a, "-movflags", "+faststart")
	}
	return append(a, "file:"+tmp)
}

// fmtLimit writes a duration bound: "10 min", "90 s".
func fmtLimit(d time.Duration) string {
	s := d.Seconds()
	if s >= 60 && int64(s)%60 == 0 {
		return fmt.Sprintf("%d min", int64(s)/60)
	}
	return fmt.Sprintf("%g s", s)
}
