package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/config"
)

const skillsUsage = `usage: agentctl skills list                     every skill: source, offered or why not
       agentctl skills install PATH_OR_TARBALL  install a skill folder or a .tar/.tar.gz archive (shows its SHA-256)
       agentctl skills enable NAME
       agentctl skills disable NAME
`

// runSkills is `agentctl skills list|install|enable|disable`.
func runSkills(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	switch {
	case len(args) == 1 && args[0] == "list":
		return withClient(path, stderr, env, func(c *admin.Client) error {
			list, err := c.SkillsList(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, list)
			}
			writeSkills(stdout, list)
			return nil
		})
	case len(args) == 2 && args[0] == "install":
		archive, err := skillArchive(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "agentctl: %v\n", err)
			return 1
		}
		sum := sha256.Sum256(archive)
		local := hex.EncodeToString(sum[:])
		return withClient(path, stderr, env, func(c *admin.Client) error {
			in, err := c.InstallSkill(ctx, bytes.NewReader(archive))
			if err != nil {
				return err
			}
			if in.SHA256 != local {
				return fmt.Errorf("the daemon received an archive with SHA-256 %s, not the %s sent", in.SHA256, local)
			}
			if asJSON {
				return printJSON(stdout, in)
			}
			verb := "installed"
			if in.Replaced {
				verb = "replaced"
			}
			fmt.Fprintf(stdout, "%s skill %s\nsha256 %s  %s\n", verb, in.Name, in.SHA256, args[1])
			for _, f := range in.Files {
				fmt.Fprintf(stdout, "  %s  %8d  %s\n", f.SHA256, f.Size, f.Path)
			}
			return nil
		})
	case len(args) == 2 && (args[0] == "enable" || args[0] == "disable"):
		return withClient(path, stderr, env, func(c *admin.Client) error {
			info, err := c.SetSkillEnabled(ctx, args[1], args[0] == "enable")
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, info)
			}
			fmt.Fprintf(stdout, "%sd: %s (%s)\n", args[0], info.Name, skillState(info))
			return nil
		})
	}
	fmt.Fprint(stderr, skillsUsage)
	return 2
}

func skillState(s admin.SkillInfo) string {
	switch {
	case s.Error != "":
		return "error: " + s.Error
	case s.Disabled:
		return "disabled"
	case len(s.Missing) > 0:
		return "missing " + strings.Join(s.Missing, ", ")
	}
	return "offered"
}

func writeSkills(w io.Writer, list []admin.SkillInfo) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no skills (workspace skills/, the installed and the bundled skills folders are empty)")
		return
	}
	width := len("SKILL")
	for _, s := range list {
		width = max(width, len(s.Name))
	}
	fmt.Fprintf(w, "%-*s  %-9s  %s\n", width, "SKILL", "SOURCE", "STATE")
	for _, s := range list {
		state := skillState(s)
		if len(s.Shadows) > 0 {
			state += " (hides the " + strings.Join(s.Shadows, ", ") + " one)"
		}
		if len(s.Users) > 0 {
			state += " [users: " + strings.Join(s.Users, ", ") + "]"
		}
		fmt.Fprintf(w, "%-*s  %-9s  %s\n", width, s.Name, s.Source, state)
	}
}

// maxArchive is the most agentctl sends (the daemon refuses more anyway).
const maxArchive = admin.MaxSkillArchive

// skillArchive reads a tarball as it is, or packs a folder into a tar
// archive: regular files and folders as they are, symbolic links as links
// (the daemon refuses them: nothing of the folder is followed out of it).
func skillArchive(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxArchive+1))
		if err != nil {
			return nil, err
		}
		if len(data) > maxArchive {
			return nil, fmt.Errorf("%s is larger than %d MiB", path, maxArchive>>20)
		}
		return data, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if buf.Len() > maxArchive {
			return fmt.Errorf("%s holds more than %d MiB", path, maxArchive>>20)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			link, _ = root.Readlink(p)
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(p)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > maxArchive {
		return nil, errors.New(path + " is too large to install")
	}
	return buf.Bytes(), nil
}
