package video

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"agent/pkg/tools"
)

// BGMArgs are add_bgm's arguments.
type BGMArgs struct {
	Video  string   `json:"video"`
	Audio  string   `json:"audio"`
	Mode   string   `json:"mode" enum:"replace,mix" desc:"replace: music only; mix: music under the video's own sound"`
	Volume *float64 `json:"volume,omitempty" desc:"music loudness 0-2; default 0.3 mixing, 1 replacing"`
	Output string   `json:"output,omitempty"`
}

// Bounds of add_bgm.
const (
	defaultMixVolume = 0.3
	maxVolume        = 2.0
	// minMusic is the shortest music add_bgm loops (anything shorter is
	// no music, and looping it would never end).
	minMusic = 0.1
)

func (k *kit) bgmTool() tools.Tool {
	return tools.Tool{
		Name: "add_bgm",
		Description: fmt.Sprintf("Put background music under a video (at most %s): cut or repeated to the video's length. Default output <name>_bgm.mp4 in your folder.",
			fmtLimit(k.MaxInput)) + pathsNote,
		Schema: tools.SchemaWith[BGMArgs](map[string]string{
			"video":  "the video",
			"audio":  "a sound file, or a video whose sound is taken",
			"output": outputNote,
		}),
		Handler: k.bgm,
	}
}

func (k *kit) bgm(ctx context.Context, call tools.Call) (string, error) {
	const tool = "add_bgm"
	a, err := tools.Decode[BGMArgs](call.Args)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", tools.ErrBadArgs, tool, err)
	}
	if a.Volume != nil && !(*a.Volume >= 0 && *a.Volume <= maxVolume) {
		return "", argErr(tool, "volume must be between 0 and %g (1 is the music as recorded), got %v", maxVolume, *a.Volume)
	}
	j, err := k.begin(tool, call)
	if err != nil {
		return "", err
	}
	defer j.close()
	vin, err := j.input("video", a.Video)
	if err != nil {
		return "", err
	}
	ain, err := j.input("audio", a.Audio)
	if err != nil {
		return "", err
	}
	out, err := j.output(a.Output, defaultName(vin, "_bgm"))
	if err != nil {
		return "", err
	}
	ms, err := j.probe(ctx, vin, ain)
	if err != nil {
		return "", err
	}
	v, err := j.clip(vin, ms[0])
	if err != nil {
		return "", err
	}
	music, ok := ms[1].audio()
	if !ok {
		return "", fmt.Errorf("%s: %s has no sound in it", tool, userPath(ain))
	}
	if d := ms[1].duration(); d >= 0 && d < minMusic {
		return "", fmt.Errorf("%s: %s is only %s long; give music of some length", tool, userPath(ain), fmtDur(d))
	}
	length := v.Duration
	if length <= 0 {
		length = ms[0].duration()
	}
	own, hasOwn := ms[0].audio()
	mix := a.Mode == "mix" && hasOwn
	vol := 1.0
	if mix {
		vol = defaultMixVolume
	}
	if a.Volume != nil {
		vol = *a.Volume
	}

	tmp, err := j.prepare(out)
	if err != nil {
		return "", err
	}
	argv := ffmpegArgs()
	argv = append(argv, "-threads", "2", "-i", "file:"+vin,
		"-threads", "2", "-stream_loop", "-1", "-i", "file:"+ain)
	volume := "volume=" + strconv.FormatFloat(vol, 'f', 3, 64)
	var graph string
	if mix {
		const norm = "aformat=sample_rates=48000:channel_layouts=stereo"
		graph = fmt.Sprintf("[0:%d]%s,apad[own];[1:%d]%s,%s[music];[own][music]amix=inputs=2:duration=first:dropout_transition=0:normalize=0[a]",
			own.Index, norm, music.Index, norm, volume)
	} else {
		graph = fmt.Sprintf("[1:%d]%s[a]", music.Index, volume)
	}
	argv = append(argv, "-filter_complex", graph, "-map", "0:"+strconv.Itoa(v.Index), "-map", "[a]")
	ext := strings.ToLower(path.Ext(out.rel))
	copied := canCopy(ext, v.Codec)
	if copied {
		argv = append(argv, "-c:v", "copy")
		if v.Codec == "hevc" && ext != ".mkv" {
			argv = append(argv, "-tag:v", "hvc1") // what Apple's players want
		}
	} else {
		argv = append(argv, "-vf", evenSize+",format=yuv420p")
		argv = append(argv, x264...)
	}
	argv = append(argv, aac...)
	argv = append(argv, "-t", ffTime(length))
	argv = append(argv, j.outputArgs(out, tmp)...)
	if _, err := j.run(ctx, "ffmpeg", j.limits(), nil, argv...); err != nil {
		return "", err
	}
	rel, om, err := j.finish(ctx, tmp, out, length)
	if err != nil {
		return "", err
	}
	how := fmt.Sprintf("%s with %s as its sound", userPath(vin), userPath(ain))
	switch {
	case mix:
		how = fmt.Sprintf("%s with %s mixed in at volume %g", userPath(vin), userPath(ain), vol)
	case a.Mode == "mix":
		how += "; the video had no sound of its own to mix with"
	}
	if !copied {
		how += "; the picture was re-encoded as H.264"
	}
	return report(rel, om, how), nil
}

// canCopy reports whether a video stream in codec can go into the
// container of ext unchanged.
func canCopy(ext, codec string) bool {
	switch ext {
	case ".mkv":
		return codec != ""
	case ".mov":
		return slices.Contains([]string{"h264", "hevc", "mpeg4", "prores", "mjpeg"}, codec)
	}
	return slices.Contains([]string{"h264", "hevc", "mpeg4", "av1", "vp9"}, codec)
}
