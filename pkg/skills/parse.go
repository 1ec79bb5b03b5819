package skills

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"agent/pkg/clip"
	"agent/pkg/invisible"

	"go.yaml.in/yaml/v3"
)

const (
	maxSkillFile   = 64 << 10 // SKILL.md bytes read
	maxFrontMatter = 16 << 10 // front matter bytes parsed
	maxDesc        = 300      // description bytes, "..." included
	maxReqItems    = 64       // items in one requirement list
	maxReqItem     = 128      // bytes in one requirement item
	maxErr         = 300      // bytes of an Err kept
)

// metadataKeys are the keys under metadata: whose requires/os blocks count
// (openclaw and its former names, picoclaw, and ours).
var metadataKeys = []string{"openclaw", "clawdbot", "clawdis", "picoclaw", "agent"}

// parsed is what SKILL.md says about itself.
type parsed struct {
	Name        string
	Description string
	Requires    Requirements
	Err         string // why the front matter is unusable ("" when fine)
	Stripped    int    // invisible characters taken out of the description
}

// parse reads a SKILL.md (already bounded by the caller). folder is the
// name the skill takes when neither the front matter nor a first heading
// gives a valid one. It never panics: a YAML failure becomes Err.
func parse(content []byte, folder string) parsed {
	var p parsed
	content = bytes.TrimPrefix(content, []byte("\uFEFF"))
	front, body, hasFront, ferr := splitFrontMatter(content)
	fmName := ""
	if ferr != "" {
		p.Err = ferr
		body = nil
	} else if hasFront {
		var err error
		fmName, p.Description, p.Requires, err = decodeFrontMatter(front)
		if err != nil {
			if n, d, ok := lenientFront(front); ok {
				fmName, p.Description, p.Requires = n, d, Requirements{}
			} else {
				p.Err = clip.String("front matter: "+oneLine(err.Error()), maxErr)
			}
		}
	}
	heading, first := scanBody(body)
	switch {
	case fmName != "":
		p.Name = fmName
	case validName(heading):
		p.Name = heading
	default:
		p.Name = folder
	}
	if p.Description == "" {
		p.Description = first
	}
	p.Description, p.Stripped = cleanDesc(p.Description)
	if p.Err == "" && !validName(p.Name) {
		p.Err = fmt.Sprintf("invalid name %q (want letters, digits, '_', '.', '-', at most 64, starting with a letter or digit)", clip.String(p.Name, 80))
		p.Name = safeText(p.Name, 80)
	}
	return p
}

// splitFrontMatter separates a leading "---" block from the body. An
// unterminated or oversized block is an error (the whole file would
// otherwise be taken for instructions).
func splitFrontMatter(content []byte) (front, body []byte, ok bool, err string) {
	line, rest, _ := bytes.Cut(content, []byte("\n"))
	if string(bytes.TrimRight(line, " \t\r")) != "---" {
		return nil, content, false, ""
	}
	start := len(content) - len(rest)
	for off := start; off < len(content); {
		if off-start > maxFrontMatter {
			return nil, nil, true, fmt.Sprintf("front matter: longer than %d KiB", maxFrontMatter>>10)
		}
		line, _, found := bytes.Cut(content[off:], []byte("\n"))
		next := off + len(line) + 1
		if !found {
			next = len(content)
		}
		if t := string(bytes.TrimRight(line, " \t\r")); t == "---" || t == "..." {
			return content[start:off], content[next:], true, ""
		}
		off = next
	}
	return nil, nil, true, "front matter: no closing ---"
}

// lenientFront reads the front matter many skills in the wild have that
// is not valid YAML — most often an unquoted "description: Do x: y" — line
// by line: top-level "key: value" lines, a value going on over indented
// lines. It succeeds only when no key that gates a skill (metadata,
// requires, os) is there: requirements that cannot be read must not be
// taken for none.
func lenientFront(front []byte) (name, desc string, ok bool) {
	var key string
	vals := map[string]string{}
	for _, line := range strings.Split(string(front), "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key == "" {
				return "", "", false
			}
			vals[key] = strings.TrimSpace(vals[key] + " " + strings.TrimSpace(line))
			continue
		}
		k, v, found := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !found || k == "" || strings.ContainsAny(k, " \t\"'{}[]") {
			return "", "", false
		}
		switch k {
		case "metadata", "requires", "os":
			return "", "", false
		}
		v = strings.TrimSpace(v)
		if v != "" && strings.ContainsRune("[{&*!|>%@`", rune(v[0])) {
			return "", "", false // YAML syntax, not plain text: no guessing
		}
		key = k
		vals[k] = v
	}
	unquote := func(s string) string {
		if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
			return s[1 : len(s)-1]
		}
		return s
	}
	return unquote(vals["name"]), unquote(vals["description"]), true
}

// decodeFrontMatter pulls the known fields out of the YAML. Unknown fields
// are ignored; a known field of the wrong shape is an error (a skill whose
// requirements cannot be read must not be offered as if it had none).
func decodeFrontMatter(front []byte) (name, desc string, req Requirements, err error) {
	defer func() {
		if r := recover(); r != nil { // the YAML library is not ours; its bugs are not our crash
			err = fmt.Errorf("yaml: internal error: %v", r)
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(front, &doc); err != nil {
		return "", "", req, err
	}
	if doc.Kind == 0 { // empty front matter
		return "", "", req, nil
	}
	root := deref(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = deref(root.Content[0])
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return "", "", req, nil
	}
	if root.Kind != yaml.MappingNode {
		return "", "", req, fmt.Errorf("not a mapping")
	}
	if name, err = scalar(root, "name"); err != nil {
		return "", "", req, err
	}
	name = strings.TrimSpace(name)
	if desc, err = scalar(root, "description"); err != nil {
		return "", "", req, err
	}
	if err := addBlock(&req, root, ""); err != nil {
		return "", "", req, err
	}
	meta := deref(get(root, "metadata"))
	if meta != nil && meta.Kind == yaml.ScalarNode && strings.HasPrefix(strings.TrimSpace(meta.Value), "{") {
		// metadata written as a quoted JSON string: JSON is YAML.
		var inner yaml.Node
		if err := yaml.Unmarshal([]byte(meta.Value), &inner); err != nil {
			return "", "", req, fmt.Errorf("metadata: %w", err)
		}
		meta = deref(&inner)
		if meta.Kind == yaml.DocumentNode && len(meta.Content) == 1 {
			meta = deref(meta.Content[0])
		}
	}
	if meta != nil && meta.Kind == yaml.MappingNode {
		for _, k := range metadataKeys {
			b := deref(get(meta, k))
			if b == nil || (b.Kind == yaml.ScalarNode && b.Tag == "!!null") {
				continue
			}
			if b.Kind != yaml.MappingNode {
				return "", "", req, fmt.Errorf("metadata.%s: want a mapping", k)
			}
			if err := addBlock(&req, b, "metadata."+k+"."); err != nil {
				return "", "", req, err
			}
		}
	}
	return name, desc, req, nil
}

// addBlock adds the requires: {bins, anyBins, env, config} and os: of one
// block (the top level or a metadata.<key> mapping) to req.
func addBlock(req *Requirements, block *yaml.Node, prefix string) error {
	if r := deref(get(block, "requires")); r != nil && !(r.Kind == yaml.ScalarNode && r.Tag == "!!null") {
		if r.Kind != yaml.MappingNode {
			return fmt.Errorf("%srequires: want a mapping", prefix)
		}
		for _, f := range []struct {
			key string
			dst *[]string
		}{{"bins", &req.Bins}, {"anyBins", &req.AnyBins}, {"env", &req.Env}, {"config", &req.Config}} {
			items, err := list(r, f.key)
			if err != nil {
				return fmt.Errorf("%srequires.%s: %w", prefix, f.key, err)
			}
			*f.dst = union(*f.dst, items)
		}
	}
	items, err := list(block, "os")
	if err != nil {
		return fmt.Errorf("%sos: %w", prefix, err)
	}
	for i, v := range items {
		items[i] = normOS(v)
	}
	req.OS = union(req.OS, items)
	return nil
}

// deref follows aliases (a bounded number of hops: yaml.v3 refuses cyclic
// anchors, this guards anyway).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// get is the value of key in mapping m, nil when absent.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := deref(m.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// scalar is the string value of key ("" when absent or null).
func scalar(m *yaml.Node, key string) (string, error) {
	n := deref(get(m, key))
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("%s: want a string", key)
	}
	return n.Value, nil
}

// list is key's value as a list of strings: a sequence of scalars, or one
// scalar. Items are trimmed, empty ones dropped, and bounded.
func list(m *yaml.Node, key string) ([]string, error) {
	n := deref(get(m, key))
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, nil
	}
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		return nil, fmt.Errorf("want a list of strings")
	}
	if len(items) > maxReqItems {
		return nil, fmt.Errorf("more than %d items", maxReqItems)
	}
	var out []string
	for _, it := range items {
		it = deref(it)
		if it == nil || it.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("want a list of strings")
		}
		v := strings.TrimSpace(it.Value)
		if v == "" {
			continue
		}
		if len(v) > maxReqItem || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("item %q: too long or not plain text", clip.String(v, 40))
		}
		out = append(out, v)
	}
	return out, nil
}

// union appends the items of b not already in a.
func union(a, b []string) []string {
	for _, v := range b {
		dup := false
		for _, w := range a {
			dup = dup || v == w
		}
		if !dup {
			a = append(a, v)
		}
	}
	return a
}

// normOS maps an os value (or a GOOS) to openclaw's spelling.
func normOS(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "windows" {
		return "win32"
	}
	return v
}

// scanBody finds the first heading (before the first paragraph) and the
// first line of the first paragraph, as the previous prompt code did.
func scanBody(body []byte) (heading, first string) {
	gotHeading := false
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		t := strings.TrimSpace(string(line))
		if t == "" {
			continue
		}
		if strings.HasPrefix(t, "#") {
			if !gotHeading {
				heading, gotHeading = strings.TrimSpace(strings.TrimLeft(t, "#")), true
			}
			continue
		}
		return heading, t
	}
	return heading, ""
}

// cleanDesc makes a description one line of printable UTF-8 of at most
// maxDesc bytes, without invisible characters (pkg/invisible: it enters
// the system message); it returns how many of those it took out.
func cleanDesc(s string) (string, int) {
	s, n := invisible.Strip(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxDesc {
		s = clip.Bytes(s, maxDesc-3) + "..."
	}
	return s, n
}

// oneLine collapses whitespace (a YAML error message may span lines).
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// validName reports whether name matches ^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}
