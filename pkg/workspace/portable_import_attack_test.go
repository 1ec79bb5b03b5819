package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A user's sandboxed run (exec: the folder is mounted read-write at
// /work) makes folders as deep and paths as long as it likes; the file
// tools' bounds (MaxDepth, MaxPath) are only checked on the paths the
// tools are given. ExportFiles writes such a tree, ImportFiles refuses
// it: every move of that user fails (and is undone), so one `mkdir -p`
// makes a user unmovable off a failing box.
func TestExportWritesWhatImportRefuses(t *testing.T) {
	for name, rel := range map[string]string{
		"deep": strings.Repeat("d/", MaxDepth+2) + "f.txt",
		"long": strings.Repeat(strings.Repeat("n", 60)+"/", 20) + "f.txt", // 20 levels, > MaxPath bytes
	} {
		t.Run(name, func(t *testing.T) {
			from, to := newRig(t, 0), newRig(t, 0)
			dir, _ := from.s.UserDir("wecom:bob")
			// What `mkdir -p ... && echo x > .../f.txt` does in the sandbox.
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if err := root.MkdirAll(filepath.Dir(rel), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := root.WriteFile(rel, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "notes.md"), []byte("the user's notes"), 0o600)
			var buf bytes.Buffer
			if _, err := from.s.ExportFiles("wecom:bob", &buf); err != nil {
				t.Fatalf("export: %v", err) // refusing here would at least name the cause
			}
			if _, err := to.s.ImportFiles("wecom:bob", &buf); err != nil {
				t.Fatalf("the box's own export cannot be imported, so the user can never be moved: %v", err)
			}
		})
	}
}

// An import "replaces a file already there", but the quota check counts
// the incoming size on top of the old copy: an import tried again over
// the same files (or a move back to a box that still holds the user's
// files: a purge that failed, a conversation rehomed with agentctl fleet
// home) fails with ErrQuota although the folder would end no larger.
func TestImportOverTheSameFilesCountsThemTwice(t *testing.T) {
	from, to := newRig(t, 0), newRig(t, 200_000)
	dir, _ := from.s.UserDir("wecom:bob")
	os.WriteFile(filepath.Join(dir, "report.pdf"), bytes.Repeat([]byte("p"), 120_000), 0o600)
	var buf bytes.Buffer
	if _, err := from.s.ExportFiles("wecom:bob", &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := to.s.ImportFiles("wecom:bob", bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("first import: %v", err)
	}
	if _, err := to.s.ImportFiles("wecom:bob", bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("the same import again (same files, same final size): %v", err)
	}
}

// A FIFO the user planted in their folder on the target box (left there
// from an earlier stay: the purge failed, or the user was rehomed with
// agentctl fleet home, which leaves the data) under a name the stream
// also has: ImportFiles opens it O_WRONLY without O_NONBLOCK and blocks
// in the kernel for good, holding the folder's lock (every file tool of
// the user on that box hangs behind it) and the fleet's per-conversation
// ctl queue (the undo's purge waits behind it too). ExportFiles skips
// FIFOs; ImportFiles does not look.
func TestImportBlocksOnAPlantedFIFO(t *testing.T) {
	from, to := newRig(t, 0), newRig(t, 0)
	src, _ := from.s.UserDir("wecom:bob")
	os.WriteFile(filepath.Join(src, "notes.md"), []byte("notes"), 0o600)
	var buf bytes.Buffer
	if _, err := from.s.ExportFiles("wecom:bob", &buf); err != nil {
		t.Fatal(err)
	}
	dst, _ := to.s.UserDir("wecom:bob")
	fifo := filepath.Join(dst, "notes.md")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := to.s.ImportFiles("wecom:bob", bytes.NewReader(buf.Bytes()))
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("import returned: %v", err)
	case <-time.After(3 * time.Second):
		// Let the stuck open go, so the test ends.
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		<-done
		t.Fatal("ImportFiles blocked for 3s opening a FIFO planted in the target folder")
	}
}
