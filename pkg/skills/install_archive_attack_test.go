package skills_test

// The skills installer against archives as real tools make them.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"agent/pkg/skills"
)

// `git archive` (and so every GitHub "Download tarball" / codeload
// .tar.gz) starts with a pax global header ("pax_global_header", type
// 'g', holding the commit id). Go's tar reader hands it to the caller as
// an entry, and the installer refuses it as "not a regular file or
// directory": `agentctl skills install repo.tar.gz` fails for the most
// common way skills are published. A global header writes nothing and
// should be skipped.
func TestAttackInstallGitArchivePaxGlobalHeader(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	hdrs := []struct {
		h    tar.Header
		body string
	}{
		{tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader,
			PAXRecords: map[string]string{"comment": "0123456789abcdef0123456789abcdef01234567"}}, ""},
		{tar.Header{Name: "weather-main/", Typeflag: tar.TypeDir, Mode: 0o775}, ""},
		{tar.Header{Name: "weather-main/SKILL.md", Typeflag: tar.TypeReg, Mode: 0o664},
			"---\nname: weather\ndescription: Weather forecasts.\n---\n# Weather\n"},
	}
	for _, e := range hdrs {
		h := e.h
		h.Size = int64(len(e.body))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(t.TempDir(), "installed")
	set := skills.New(skills.Config{Installed: installed})
	in, err := set.Install(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("a git-archive style tarball is refused: %v", err)
	}
	if in.Name != "weather" {
		t.Fatalf("installed %+v", in)
	}
	if _, err := os.Stat(filepath.Join(installed, "weather", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
}
