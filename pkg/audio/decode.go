package audio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Decoding compressed audio. WAV is read natively; everything else (AMR and
// speex from WeCom, Opus/WebM and Ogg from browsers, MP3, AAC) goes through
// ffmpeg, run without a shell, fed on stdin, with a time limit, and read
// back as 16-bit mono PCM at the rate asked for, never more than the
// length asked for.

// DecodeConfig bounds a Decode. Zero fields take the defaults.
type DecodeConfig struct {
	Rate    int           // output sample rate; default 16000
	Max     time.Duration // longest output; default 60 s (longer input is cut)
	FFmpeg  string        // the ffmpeg binary; default "ffmpeg" on PATH
	Timeout time.Duration // for ffmpeg; default 30 s
}

func (c DecodeConfig) withDefaults() DecodeConfig {
	if c.Rate <= 0 {
		c.Rate = 16000
	}
	if c.Max <= 0 {
		c.Max = time.Minute
	}
	if c.FFmpeg == "" {
		c.FFmpeg = "ffmpeg"
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

// ErrUndecodable: the data is not audio that WAV or ffmpeg can read.
var ErrUndecodable = errors.New("audio: not decodable")

// Decode returns data (a WAV or any format ffmpeg reads) as mono float32
// samples at cfg.Rate, at most cfg.Max of them in time. Errors wrap
// ErrUndecodable when the data is at fault; a missing ffmpeg or the context
// are reported as such.
func Decode(ctx context.Context, data []byte, cfg DecodeConfig) ([]float32, error) {
	cfg = cfg.withDefaults()
	maxSamples := int(cfg.Max / time.Second * time.Duration(cfg.Rate))
	if len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WAVE" {
		if s, rate, ch, err := ReadWAV(bytes.NewReader(data)); err == nil {
			s = Resample(Mono(s, ch), rate, cfg.Rate)
			return s[:min(len(s), maxSamples)], nil
		}
		// Not a PCM WAV this reader knows (float, ADPCM, ...): ffmpeg may.
	}
	pcm, err := ffmpegPCM(ctx, cfg, data, int64(maxSamples)*2)
	if err != nil {
		return nil, err
	}
	if len(pcm) == 0 {
		return nil, fmt.Errorf("%w: no audio in %d bytes", ErrUndecodable, len(data))
	}
	return PCM16ToFloat32(pcm)
}

func ffmpegPCM(ctx context.Context, cfg DecodeConfig, data []byte, maxBytes int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	secs := fmt.Sprintf("%.3f", cfg.Max.Seconds())
	cmd := exec.CommandContext(ctx, cfg.FFmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
		"-i", "pipe:0", "-t", secs, "-vn", "-ac", "1", "-ar", fmt.Sprint(cfg.Rate),
		"-f", "s16le", "-c:a", "pcm_s16le", "pipe:1")
	cmd.Stdin = bytes.NewReader(data)
	var stderr limitedBuffer
	stderr.max = 4 << 10
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("audio: ffmpeg: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("audio: ffmpeg: %w (is ffmpeg installed?)", err)
	}
	pcm, rerr := io.ReadAll(io.LimitReader(out, maxBytes+1))
	if int64(len(pcm)) > maxBytes {
		pcm = pcm[:maxBytes]
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("audio: ffmpeg: %w", ctx.Err())
	case rerr != nil:
		return nil, fmt.Errorf("audio: ffmpeg: read: %w", rerr)
	case werr != nil && int64(len(pcm)) < maxBytes:
		return nil, fmt.Errorf("%w: ffmpeg: %v: %s", ErrUndecodable, werr, strings.TrimSpace(stderr.String()))
	}
	return pcm[:len(pcm)&^1], nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
