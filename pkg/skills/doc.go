// Package skills finds, gates, indexes and installs Agent Skills in the
// open SKILL.md format (a folder holding SKILL.md — optional YAML front
// matter, then Markdown instructions — plus scripts, references and
// assets). Skills come from three directories, bundled < installed <
// workspace: a skill hides a lower-precedence one of the same name.
//
// Security stance: every skill is untrusted input, whoever put it there
// (public registries have shipped hundreds of malicious skills, and the
// agent itself can write the workspace). So:
//
//   - everything is bounded: SKILL.md is read to 64 KiB, its front matter to
//     16 KiB, descriptions to 300 bytes, 200 skills per directory, 200 files
//     listed per skill, requirement lists to 64 short items; YAML aliases are
//     never expanded beyond the few known scalar fields;
//   - nothing is followed out of a skill folder: every read goes through an
//     os.Root opened on the skills directory and then on the skill folder,
//     a symlinked skill folder is listed as unusable, never read, SKILL.md must be a regular file
//     (opened non-blocking, so a FIFO cannot hang the daemon), and file
//     listings skip symlinks and anything that is not a regular file;
//   - a skill that cannot be used (bad name, bad front matter, unmet
//     requirements, disabled by the operator) is listed with the reason but
//     never offered to the model;
//   - Install accepts only regular files and directories with local, clean,
//     UTF-8 names, refuses oversized entries from their headers before
//     reading data, caps entries, total and decompressed bytes, writes only
//     through os.Root into a temporary folder inside the installed directory
//     and swaps it in with renames, so a refused archive leaves nothing
//     behind;
//   - a parse failure is an error on that one skill, never a panic.
//
// Nothing here runs a skill's scripts: the sandbox does that, and sees
// only what the operator mounts.
package skills
