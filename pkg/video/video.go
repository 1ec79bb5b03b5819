// Package video is the video tools the model edits a user's clips with:
// trim_video (cut a clip), add_bgm (replace or mix in background music)
// and generate_video (a slideshow of pictures, optionally narrated by
// espeak-ng).
//
// Every ffprobe, ffmpeg and espeak-ng run happens inside the caller's
// sandbox (pkg/sandbox through workspace.View): the caller's folder at
// /work, shared/ read-only at /shared, nothing else. The host only picks
// names, makes folders and, once a run has written its result under a
// temporary name, links it to the name the user sees, never replacing a
// file that is there. Inputs are probed first: a clip longer than
// Config.MaxInput is refused before anything is encoded, and an output is
// capped at Config.MaxOutputMB.
package video

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"agent/pkg/clock"
	"agent/pkg/sandbox"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// Runner runs sandboxed commands (*sandbox.Sandbox).
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error)
}

// Spaces is what the tools need of the workspace (*workspace.Spaces).
type Spaces interface {
	View(call tools.Call) (workspace.View, error)
	Inside(call tools.Call, p string, file bool) (string, error)
}

// Defaults of a Config's zero fields.
const (
	DefaultMaxInput    = 10 * time.Minute
	DefaultMaxOutputMB = 200
)

// DefaultLimits are the sandbox limits of an encoding run whose Config
// leaves them zero. FileMB is left zero: it follows MaxOutputMB.
func DefaultLimits() sandbox.Limits {
	return sandbox.Limits{
		Timeout:    5 * time.Minute,
		CPUSeconds: 600,
		MemoryMB:   1536,
		MaxProcs:   64,
		OutputKB:   64,
	}
}

// Config of the video tools.
type Config struct {
	Runner Runner
	Spaces Spaces
	// MaxInput is the longest clip the tools take, and the longest
	// slideshow they make (0: DefaultMaxInput).
	MaxInput time.Duration
	// MaxOutputMB bounds a result file (0: DefaultMaxOutputMB); ffmpeg
	// stops there and the tool reports it.
	MaxOutputMB int
	// Limits of the sandbox runs that encode; zero fields take
	// DefaultLimits, and FileMB defaults to MaxOutputMB plus some room
	// for ffmpeg to finish the file.
	Limits sandbox.Limits
	// Clock names default slideshow outputs (slideshow_20260302-093000.mp4).
	Clock  clock.Clock
	Logger *slog.Logger
}

// fileSlackMB is how far past MaxOutputMB a single file may grow before
// the sandbox stops the run: ffmpeg's -fs stops writing media a little
// past its bound and then writes the index.
const fileSlackMB = 16

// withDefaults fills in the zero fields of cfg.
func (cfg Config) withDefaults() Config {
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = DefaultMaxInput
	}
	if cfg.MaxOutputMB <= 0 {
		cfg.MaxOutputMB = DefaultMaxOutputMB
	}
	if cfg.Limits.FileMB <= 0 {
		cfg.Limits.FileMB = cfg.MaxOutputMB + fileSlackMB
	}
	cfg.Limits = cfg.Limits.Or(DefaultLimits())
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// kit is a Config with its defaults, shared by the three tools.
type kit struct{ Config }

// Tools returns trim_video, add_bgm and generate_video. cfg.Runner and
// cfg.Spaces are required.
func Tools(cfg Config) []tools.Tool {
	k := &kit{cfg.withDefaults()}
	return []tools.Tool{k.trimTool(), k.bgmTool(), k.slideshowTool()}
}

// errNotConfigured is returned by a tool built without a Runner or Spaces.
var errNotConfigured = errors.New("the video tools are not set up on this server (no sandbox); tell the operator")

func (k *kit) ready() error {
	if k.Runner == nil || k.Spaces == nil {
		return errNotConfigured
	}
	return nil
}

// maxOutputBytes is the output bound given to ffmpeg's -fs.
func (k *kit) maxOutputBytes() int64 { return int64(k.MaxOutputMB) << 20 }

// pathsNote is the part of the descriptions that says what paths are.
const pathsNote = " Paths are as the file tools know them: relative to your folder, or shared/... (read-only: results go to your own folder)."

// outputNote describes the output argument.
const outputNote = "result file in your folder, ending in .mp4 (or .mov, .mkv); it must not exist yet"

func argErr(tool, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", tools.ErrBadArgs, tool, fmt.Sprintf(format, a...))
}
