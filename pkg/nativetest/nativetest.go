// Package nativetest is the one gate for tests that need something native:
// a program (espeak-ng, sox, ffmpeg, systemd-analyze, Chromium, node), the
// IANA time-zone database, a library or a model file. Without it a test
// skips, naming what is missing and the command that installs it; under
// AGENT_REQUIRE_NATIVE=1 (make test and CI set it) it fails instead, so a
// missing dependency cannot pass as a skip.
//
//	func TestSpeech(t *testing.T) {
//		espeak := nativetest.EspeakNG(t) // skips or fails without it
//		...
//	}
//
// scripts/deps.sh installs everything this package asks for.
package nativetest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Env is the environment variable that turns a missing native dependency
// from a skip into a failure.
const Env = "AGENT_REQUIRE_NATIVE"

// aptFix is the fix for what scripts/deps.sh installs from Debian.
func aptFix(pkg string) string {
	return "apt-get install " + pkg + " (scripts/deps.sh apt, or `make deps`)"
}

// Required reports whether missing dependencies fail tests
// (AGENT_REQUIRE_NATIVE=1).
func Required() bool { return os.Getenv(Env) == "1" }

// Need stops the test unless ok: a skip saying what is missing and fix,
// the command that provides it, or a failure when Required.
func Need(tb testing.TB, what, fix string, ok bool) {
	tb.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf("%s is not available; fix: %s", what, fix)
	if Required() {
		tb.Fatalf("%s (required: %s=1)", msg, Env)
	}
	tb.Skipf("%s (%s=1 makes this a failure)", msg, Env)
}

// Missing stops the test for a dependency that failed with err: Need with
// ok false, err in the message.
func Missing(tb testing.TB, what, fix string, err error) {
	tb.Helper()
	if err != nil {
		what = fmt.Sprintf("%s (%v)", what, err)
	}
	Need(tb, what, fix, false)
}

// LookPath returns the path of bin on PATH, or stops the test (Need)
// naming bin and fix.
func LookPath(tb testing.TB, bin, fix string) string {
	tb.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		Missing(tb, bin, fix, err)
	}
	return p
}

// EspeakNG returns the espeak-ng program (speech synthesis for tests).
func EspeakNG(tb testing.TB) string {
	tb.Helper()
	return LookPath(tb, "espeak-ng", aptFix("espeak-ng"))
}

// Sox returns the sox program.
func Sox(tb testing.TB) string {
	tb.Helper()
	return LookPath(tb, "sox", aptFix("sox"))
}

// FFmpeg returns the ffmpeg program.
func FFmpeg(tb testing.TB) string {
	tb.Helper()
	return LookPath(tb, "ffmpeg", aptFix("ffmpeg"))
}

// SystemdAnalyze returns systemd-analyze (it verifies the unit files).
func SystemdAnalyze(tb testing.TB) string {
	tb.Helper()
	return LookPath(tb, "systemd-analyze", aptFix("systemd"))
}

// Chromium returns a headless-capable Chromium (Debian's chromium, or
// chromium-browser elsewhere).
func Chromium(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("chromium-browser"); err == nil {
		if _, err := exec.LookPath("chromium"); err != nil {
			return p // not Debian: Ubuntu's and others' name
		}
	}
	return LookPath(tb, "chromium", aptFix("chromium"))
}

// Node returns the node program (reference scripts, npm MCP servers).
func Node(tb testing.TB) string {
	tb.Helper()
	return LookPath(tb, "node", aptFix("nodejs npm"))
}

// File returns path when it exists, or stops the test (Need) naming what
// and fix.
func File(tb testing.TB, path, what, fix string) string {
	tb.Helper()
	_, err := os.Stat(path)
	if err != nil {
		Missing(tb, what+" ("+path+")", fix, err)
	}
	return path
}

// Location loads an IANA time zone ("Asia/Shanghai"), or stops the test
// (Need) when the time-zone database is missing.
func Location(tb testing.TB, name string) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		Missing(tb, "time zone "+name, aptFix("tzdata"), err)
	}
	return loc
}

// TZData stops the test (Need) unless the IANA time-zone database is
// installed.
func TZData(tb testing.TB) {
	tb.Helper()
	Location(tb, "Asia/Shanghai")
}
