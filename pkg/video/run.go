package video

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"agent/pkg/clip"
	"agent/pkg/sandbox"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// job is one tool call's use of the sandbox: what the run sees of the
// workspace and, on the host, the caller's folder as an os.Root (names
// are picked, folders made and results linked through it, so nothing the
// host does leaves the folder).
type job struct {
	k    *kit
	tool string
	call tools.Call
	view workspace.View
	root *os.Root
	// temps are files in the folder (relative) the job removes when done.
	temps []string
}

// begin opens the caller's view for tool.
func (k *kit) begin(tool string, call tools.Call) (*job, error) {
	if err := k.ready(); err != nil {
		return nil, err
	}
	v, err := k.Spaces.View(call)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	root, err := os.OpenRoot(v.Work)
	if err != nil {
		return nil, fmt.Errorf("%s: your folder: %w", tool, err)
	}
	return &job{k: k, tool: tool, call: call, view: v, root: root}, nil
}

// close removes the job's temporary files and closes its root.
func (j *job) close() {
	for _, t := range j.temps {
		_ = j.root.Remove(t)
	}
	j.root.Close()
}

// input maps the user's path p of an existing file to where the sandbox
// sees it.
func (j *job) input(name, p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", argErr(j.tool, "%s is empty; give a file path", name)
	}
	in, err := j.k.Spaces.Inside(j.call, p, true)
	if err != nil {
		return "", fmt.Errorf("%s: %s %s: %w", j.tool, name, clip.String(p, 120), err)
	}
	return in, nil
}

// temp names a new temporary file in the folder's directory dir
// (relative, "" for the top), removed when the job ends: its path
// inside the sandbox and relative to the folder.
func (j *job) temp(dir, ext string) (inside, rel string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	rel = path.Join(dir, ".video-"+hex.EncodeToString(b[:])+ext)
	j.temps = append(j.temps, rel)
	return workspace.WorkMount + "/" + rel, rel
}

// limits are the encoding limits of the job's runs.
func (j *job) limits() sandbox.Limits { return j.k.Limits }

// probeLimits bound an ffprobe or espeak-ng run: the encoding limits
// with a shorter wall time.
func (j *job) probeLimits() sandbox.Limits {
	l := j.k.Limits
	l.Timeout = min(l.Timeout, 60*time.Second)
	l.CPUSeconds = min(l.CPUSeconds, 60)
	return l
}

// run runs argv in the caller's sandbox. A run that did not start, went
// over a limit or failed is an error naming what (prog) and why, with the
// last lines of its stderr.
func (j *job) run(ctx context.Context, prog string, lim sandbox.Limits, stdin []byte, argv ...string) (*sandbox.Result, error) {
	spec := j.view.Spec(argv...)
	spec.Limits = lim
	spec.Stdin = stdin
	res, err := j.k.Runner.Run(ctx, spec)
	if err != nil {
		j.k.Logger.Error("video: sandbox failed", "tool", j.tool, "scope", j.view.Scope, "err", err)
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, fmt.Errorf("%s: the sandbox failed, nothing ran: %v", j.tool, err)
		}
		return nil, fmt.Errorf("%s: %w", j.tool, err)
	}
	j.k.Logger.Info("video: run", "tool", j.tool, "scope", j.view.Scope, "prog", prog, "exit", res.Exit,
		"limit", string(res.Limit), "took", res.Elapsed.Round(time.Millisecond))
	if res.Limit != sandbox.LimitNone {
		return res, fmt.Errorf("%s: %s was stopped: %s%s", j.tool, prog, limitText(res), lastLines(res.Stderr, ""))
	}
	if res.Exit != 0 {
		return res, fmt.Errorf("%s: %s failed (exit status %d)%s", j.tool, prog, res.Exit, lastLines(res.Stderr, ""))
	}
	return res, nil
}

// limitText says which sandbox limit ended a run, and what to do.
func limitText(res *sandbox.Result) string {
	switch res.Limit {
	case sandbox.LimitTime:
		return "it took too long (" + res.Detail + "); try a shorter clip or fewer pictures"
	case sandbox.LimitCPU:
		return "it used too much CPU time (" + res.Detail + "); try a shorter clip or fewer pictures"
	case sandbox.LimitFileSize:
		return "a file it wrote grew too large (" + res.Detail + "); try a shorter clip"
	case sandbox.LimitDisk:
		return "out of disk room: " + res.Detail
	case sandbox.LimitOutput:
		return "it printed too much (" + res.Detail + ")"
	case sandbox.LimitMemory:
		return "it needed more memory than a run may have (" + res.Detail + "); try a shorter clip or fewer pictures"
	case sandbox.LimitCancelled:
		return "the request was cancelled (" + res.Detail + ")"
	}
	return fmt.Sprintf("over the %s limit (%s)", res.Limit, res.Detail)
}

// Bounds of an error summary.
const (
	summaryLines    = 6
	summaryLineMax  = 240
	summaryTotalMax = 900
)

// lastLines is ": " and the last lines of stderr, with sandbox paths
// written as the user knows them, or "" when there is nothing to show.
// Lines holding only must are kept (a file's name) when must is set.
func lastLines(stderr []byte, must string) string {
	var lines []string
	for l := range strings.SplitSeq(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || (must != "" && !strings.Contains(l, must)) {
			continue
		}
		if n := len(lines); n > 0 && lines[n-1] == l {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > summaryLines {
		lines = lines[len(lines)-summaryLines:]
	}
	for i, l := range lines {
		lines[i] = clip.String(userPaths(strings.ToValidUTF8(l, "\uFFFD")), summaryLineMax)
	}
	return ": " + clip.String(strings.Join(lines, " | "), summaryTotalMax)
}

// userPaths rewrites the sandbox's paths in s as the user's.
func userPaths(s string) string {
	s = strings.ReplaceAll(s, "file:"+workspace.WorkMount+"/", "")
	s = strings.ReplaceAll(s, "file:"+workspace.SharedMount+"/", "shared/")
	s = strings.ReplaceAll(s, workspace.WorkMount+"/", "")
	return strings.ReplaceAll(s, workspace.SharedMount+"/", "shared/")
}

// userPath is the sandbox path in as the user knows it.
func userPath(in string) string {
	if rel, ok := strings.CutPrefix(in, workspace.SharedMount+"/"); ok {
		return workspace.SharedDir + "/" + rel
	}
	return strings.TrimPrefix(in, workspace.WorkMount+"/")
}

// media is what ffprobe tells of a file.
type media struct {
	Failed  bool `json:"failed"`
	Streams []struct {
		Index       int    `json:"index"`
		CodecType   string `json:"codec_type"`
		CodecName   string `json:"codec_name"`
		Width       int    `json:"width"`
		Height      int    `json:"height"`
		Duration    string `json:"duration"`
		Disposition struct {
			AttachedPic int `json:"attached_pic"`
		} `json:"disposition"`
	} `json:"streams"`
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
		Size       string `json:"size"`
	} `json:"format"`
}

// stream is a media stream found by video or audio.
type stream struct {
	Index         int
	Codec         string
	Width, Height int
	Duration      float64 // -1: unknown
}

// video is the first video stream that is not a cover picture.
func (m *media) video() (stream, bool) {
	for _, s := range m.Streams {
		if s.CodecType == "video" && s.Disposition.AttachedPic == 0 {
			return stream{s.Index, s.CodecName, s.Width, s.Height, seconds(s.Duration)}, true
		}
	}
	return stream{}, false
}

// audio is the first audio stream.
func (m *media) audio() (stream, bool) {
	for _, s := range m.Streams {
		if s.CodecType == "audio" {
			return stream{Index: s.Index, Codec: s.CodecName, Duration: seconds(s.Duration)}, true
		}
	}
	return stream{}, false
}

// duration is the file's length in seconds, -1 when ffprobe cannot tell.
func (m *media) duration() float64 {
	if d := seconds(m.Format.Duration); d >= 0 {
		return d
	}
	longest := -1.0
	for _, s := range m.Streams {
		longest = max(longest, seconds(s.Duration))
	}
	return longest
}

// size is the file's size in bytes, -1 when unknown.
func (m *media) size() int64 {
	n, err := strconv.ParseInt(m.Format.Size, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// seconds parses an ffprobe duration ("N/A" and the like: -1).
func seconds(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != v || v < 0 || v > 1e9 {
		return -1
	}
	return v
}

// probeScript runs ffprobe on each argument and prints one JSON object a
// file (failed: true for one ffprobe cannot read). The paths are
// arguments, never part of the script.
const probeScript = `for f do
  if out=$(ffprobe -v error -of json=c=1 -show_entries 'format=duration,format_name,size:stream=index,codec_type,codec_name,width,height,duration:stream_disposition=attached_pic' "file:$f"); then
    printf '%s\n' "$out"
  else
    echo '{"failed":true}'
  fi
done`

// probe runs ffprobe in the sandbox on the files at the sandbox paths
// ins (all in one run) and returns what it says of each. A file ffprobe
// cannot read is an error naming it (as users name it) and why.
func (j *job) probe(ctx context.Context, ins ...string) ([]*media, error) {
	argv := append([]string{"/bin/sh", "-c", probeScript, "sh"}, ins...)
	res, err := j.run(ctx, "ffprobe", j.probeLimits(), nil, argv...)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(res.Stdout)))
	out := make([]*media, 0, len(ins))
	for _, in := range ins {
		m := new(media)
		if err := dec.Decode(m); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("no answer")
			}
			return nil, fmt.Errorf("%s: reading ffprobe's report on %s failed: %v", j.tool, userPath(in), err)
		}
		if m.Failed {
			why := lastLines(res.Stderr, in)
			if why == "" {
				why = lastLines(res.Stderr, "")
			}
			return nil, fmt.Errorf("%s: %s is not a video, sound or picture file ffmpeg can read%s", j.tool, userPath(in), why)
		}
		out = append(out, m)
	}
	return out, nil
}

// target is where a result goes: a path relative to the caller's folder.
type target struct {
	rel string
	// explicit: the user named it, so an existing file is an error;
	// otherwise the next free name (_2, _3...) is taken.
	explicit bool
}

// outputExts are the containers the tools write, with ffmpeg's muxer.
var outputExts = map[string]string{".mp4": "mp4", ".mov": "mov", ".mkv": "matroska"}

// maxNumbered is how many numbered default names are tried.
const maxNumbered = 999

// output resolves the output argument (or, when it is empty, def: a path
// relative to the folder) to a target whose name is free now.
func (j *job) output(given, def string) (target, error) {
	t := target{explicit: strings.TrimSpace(given) != ""}
	p := def
	if t.explicit {
		p = given
	}
	in, err := j.k.Spaces.Inside(j.call, p, false)
	if err != nil {
		return t, fmt.Errorf("%s: output %s: %w", j.tool, clip.String(p, 120), err)
	}
	rel, ok := strings.CutPrefix(in, workspace.WorkMount+"/")
	if !ok || rel == "" {
		return t, fmt.Errorf("%s: output %s: results go to your own folder", j.tool, clip.String(p, 120))
	}
	ext := strings.ToLower(path.Ext(rel))
	if _, ok := outputExts[ext]; !ok {
		return t, argErr(j.tool, "output %s must end in .mp4 (or .mov, .mkv)", clip.String(p, 120))
	}
	if t.explicit {
		t.rel = rel
		if j.exists(rel) {
			return t, fmt.Errorf("%s: output %s already exists; give another name, or leave output out to get a new one", j.tool, clip.String(p, 120))
		}
		return t, nil
	}
	t.rel, err = j.free(rel)
	return t, err
}

// free is rel, or the first of rel_2, rel_3... that does not exist.
func (j *job) free(rel string) (string, error) {
	ext := path.Ext(rel)
	stem := strings.TrimSuffix(rel, ext)
	for n := 1; n <= maxNumbered; n++ {
		cand := rel
		if n > 1 {
			cand = stem + "_" + strconv.Itoa(n) + ext
		}
		if !j.exists(cand) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s: %s and %d numbered copies exist already; give output, or delete some", j.tool, rel, maxNumbered)
}

// exists reports whether rel is taken (a file, folder or link; a path
// that cannot be looked at counts as taken).
func (j *job) exists(rel string) bool {
	_, err := j.root.Lstat(rel)
	return !errors.Is(err, fs.ErrNotExist)
}

// prepare makes the folders of t and returns where the sandbox writes
// the result before finish names it: a temporary file beside it.
func (j *job) prepare(t target) (inside string, err error) {
	dir := path.Dir(t.rel)
	if dir == "." {
		dir = ""
	}
	if dir != "" {
		if err := j.root.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("%s: making the folder %s for the output failed: %v", j.tool, dir, err)
		}
	}
	inside, _ = j.temp(dir, ".part")
	return inside, nil
}

// finish checks the result written at tmp (a sandbox path from prepare)
// and links it to t's name, never over a file that appeared meanwhile (a
// default name moves on to the next free one). It returns the user's
// path and what ffprobe says of the result.
func (j *job) finish(ctx context.Context, tmp string, t target, want float64) (string, *media, error) {
	ms, err := j.probe(ctx, tmp)
	if err != nil {
		return "", nil, err
	}
	m := ms[0]
	if n := m.size(); n >= j.k.maxOutputBytes() {
		return "", nil, fmt.Errorf("%s: the result would be larger than %d MB, the most this tool writes (ffmpeg stopped at %s of %s); make it shorter",
			j.tool, j.k.MaxOutputMB, fmtDur(m.duration()), fmtDur(want))
	}
	if _, ok := m.video(); !ok {
		return "", nil, fmt.Errorf("%s: ffmpeg wrote no video; nothing saved", j.tool)
	}
	tmpRel := strings.TrimPrefix(tmp, workspace.WorkMount+"/")
	rel := t.rel
	for {
		err := j.root.Link(tmpRel, rel)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", nil, fmt.Errorf("%s: saving %s failed: %v", j.tool, rel, err)
		}
		if t.explicit {
			return "", nil, fmt.Errorf("%s: %s appeared while encoding; nothing replaced. Give another output name", j.tool, rel)
		}
		if rel, err = j.free(t.rel); err != nil {
			return "", nil, err
		}
	}
	return rel, m, nil
}

// report describes a result for the model: where it is, what it is
// (what says how it was made) and how to send it.
func report(rel string, m *media, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Saved %s (%s): %s", rel, what, fmtDur(m.duration()))
	if v, ok := m.video(); ok && v.Width > 0 {
		fmt.Fprintf(&b, ", %dx%d", v.Width, v.Height)
	}
	size := m.size()
	if size >= 0 {
		fmt.Fprintf(&b, ", %s", fmtSize(size))
	}
	if _, ok := m.audio(); ok {
		b.WriteString(", with sound")
	} else {
		b.WriteString(", no sound")
	}
	b.WriteString(".")
	switch {
	case strings.ToLower(path.Ext(rel)) != ".mp4":
		b.WriteString(" Send it with send_file (send_video takes .mp4 only).")
	case size > sendVideoMax:
		fmt.Fprintf(&b, " It is larger than the %d MB send_video takes on WeCom: make it shorter (trim_video) to send it there.", sendVideoMax>>20)
	default:
		b.WriteString(" Send it with send_video.")
	}
	return b.String()
}

// defaultName is the default output for the input at the sandbox path
// in: beside it with suffix added to its name and .mp4 as extension, or
// at the top of the caller's folder when the input is in shared/.
func defaultName(in, suffix string) string {
	base := path.Base(in)
	stem := clip.Bytes(strings.TrimSuffix(base, path.Ext(base)), 150)
	if stem == "" {
		stem = "video"
	}
	return path.Join(folderOf(in), stem+suffix+".mp4")
}

// sendVideoMax is the largest video send_video takes on WeCom.
const sendVideoMax = 10 << 20

func fmtSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
