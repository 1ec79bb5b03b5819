//go:build whisper

package asr

import (
	"context"
	"testing"
)

// TestThreadMatchesCall: every worker runs whisper on a thread of its own,
// and what it recognises is what the same recogniser gives with the call
// made from the goroutine (greedy decoding: the same tokens).
func TestThreadMatchesCall(t *testing.T) {
	audio := speech3s(t)
	r := newRecognizer(t, true, "auto")
	for i, w := range r.all {
		if w.thread == nil || w.job == nil {
			t.Fatalf("worker %d has no thread", i)
		}
	}
	ctx := context.Background()
	onThread, err := r.Transcribe(ctx, audio)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.all {
		w.stopThread() // full then calls whisper from the goroutine
	}
	inCall, err := r.Transcribe(ctx, audio)
	if err != nil {
		t.Fatal(err)
	}
	if onThread.Text != inCall.Text || onThread.Language != inCall.Language {
		t.Errorf("on the thread %q (%s), in the call %q (%s)", onThread.Text, onThread.Language, inCall.Text, inCall.Language)
	}
	if onThread.Text == "" {
		t.Error("nothing recognised")
	}
}
