package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// isSecretKey reports whether path names a secret key (a string tagged
// secret:"true", see secretTag): it also accepts KEY_file, and "${VAR}" in
// it honours VAR_FILE.
func isSecretKey(path []string) bool { return configSecrets().isKey(path) }

// fileSuffix turns a secret key into the key naming the file that holds it.
const fileSuffix = "_file"

// rename moves a deprecated key to its new name: the old one keeps working
// with a warning. Both are dotted paths of plain keys, e.g. {"llm.key",
// "llm.api_key"}.
type rename struct {
	Old, New string
}

// renamedKeys lists deprecated keys, oldest first. Add a line here when a key
// is renamed; INTERFACE.md promises that old keys keep working.
var renamedKeys = []rename{}

// maxUnknownWarnings bounds the unknown-key warnings one file can produce.
const maxUnknownWarnings = 50

// finding is a Problem or Warning before its line is known.
type finding struct {
	path []string // key path for the line lookup
	key  string   // key as shown
	msg  string
}

// unsetRef is a "${VAR}" whose variable was unset.
type unsetRef struct {
	path []string
	key  string
	name string
}

// pendingSecret is a secret to be read from a file once the whole file has
// been decoded (so that secrets of disabled sections are not read).
type pendingSecret struct {
	secret []string // the secret key's path, e.g. {"llm", "api_key"}
	path   []string // where a problem is reported
	shown  string   // key shown in a problem
	file   string   // path of the file as written
	source string   // where the path came from, for messages; "" for a _file key
}

// parser is the state of one Parse call.
type parser struct {
	baseDir string
	env     Env
	lines   *lineFinder

	problems []finding
	warnings []finding
	present  map[string]bool     // dotted keys given in the file (after renames)
	bad      map[string]bool     // dotted keys whose value could not be decoded
	aliases  map[string][]string // new dotted key -> old path, for line lookups
	unset    []unsetRef
	pending  []pendingSecret
	unknowns int
}

func dotted(path []string) string { return strings.Join(path, ".") }

func shown(path []string) string { return toml.Key(path).String() }

// sub returns path+key without aliasing path's backing array.
func sub(path []string, key string) []string {
	return append(path[:len(path):len(path)], key)
}

func (p *parser) problem(path []string, key, format string, args ...any) {
	if key == "" {
		key = shown(path)
	}
	p.problems = append(p.problems, finding{path: path, key: key, msg: fmt.Sprintf(format, args...)})
}

func (p *parser) warn(path []string, key, format string, args ...any) {
	if key == "" && len(path) > 0 {
		key = shown(path)
	}
	p.warnings = append(p.warnings, finding{path: path, key: key, msg: fmt.Sprintf(format, args...)})
}

// markBad records that path could not be decoded: it keeps its default and
// is not validated again.
func (p *parser) markBad(path []string) { p.bad[dotted(path)] = true }

func (p *parser) isBad(key string) bool { return p.bad[key] }

// lineOf returns the line of path, following renames back to the old key.
func (p *parser) lineOf(path []string) int {
	for n := len(path); n > 0; n-- {
		if old, ok := p.aliases[dotted(path[:n])]; ok {
			path = append(slices.Clone(old), path[n:]...)
			break
		}
	}
	return p.lines.line(path)
}

// applyRenames moves each deprecated key present in raw to its new name.
func (p *parser) applyRenames(raw map[string]any, renames []rename) {
	for _, r := range renames {
		oldPath, newPath := strings.Split(r.Old, "."), strings.Split(r.New, ".")
		parent, ok := lookupTable(raw, oldPath[:len(oldPath)-1])
		if !ok {
			continue
		}
		oldKey := oldPath[len(oldPath)-1]
		v, ok := parent[oldKey]
		if !ok {
			continue
		}
		newParent, ok := makeTable(raw, newPath[:len(newPath)-1])
		if !ok {
			p.problem(oldPath, "", "deprecated; use %s (cannot move it there: %s is not a table)", r.New, dotted(newPath[:len(newPath)-1]))
			continue
		}
		newKey := newPath[len(newPath)-1]
		if _, both := newParent[newKey]; both {
			p.problem(oldPath, "", "deprecated name of %s, and both are set; remove %s", r.New, r.Old)
			continue
		}
		delete(parent, oldKey)
		newParent[newKey] = v
		p.aliases[r.New] = oldPath
		p.warn(oldPath, "", "deprecated; renamed to %s (the old name still works for now)", r.New)
	}
}

func lookupTable(raw map[string]any, path []string) (map[string]any, bool) {
	t := raw
	for _, k := range path {
		next, ok := t[k].(map[string]any)
		if !ok {
			return nil, false
		}
		t = next
	}
	return t, true
}

func makeTable(raw map[string]any, path []string) (map[string]any, bool) {
	t := raw
	for _, k := range path {
		v, ok := t[k]
		if !ok {
			next := map[string]any{}
			t[k] = next
			t = next
			continue
		}
		next, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		t = next
	}
	return t, true
}

var durationType = reflect.TypeFor[Duration]()

// decodeTable copies the keys of tbl onto the struct rv, whose fields carry
// toml tags. path is the table's key path.
func (p *parser) decodeTable(path []string, tbl map[string]any, rv reflect.Value) {
	fields := tomlFields(rv.Type())
	for _, k := range slices.Sorted(maps.Keys(tbl)) {
		v := tbl[k]
		kp := sub(path, k)
		if i, ok := fields[k]; ok {
			p.present[dotted(kp)] = true
			p.decodeValue(kp, v, rv.Field(i))
			continue
		}
		if base, ok := strings.CutSuffix(k, fileSuffix); ok && isSecretKey(sub(path, base)) {
			secret := sub(path, base)
			if _, both := tbl[base]; both {
				p.problem(secret, "", "set either %s or %s, not both", base, k)
				p.markBad(secret)
				continue
			}
			name, ok := p.decodeString(kp, "", v)
			if !ok {
				p.markBad(secret)
				continue
			}
			p.present[dotted(secret)] = true
			p.pending = append(p.pending, pendingSecret{secret: secret, path: kp, shown: shown(kp), file: name})
			continue
		}
		p.unknown(kp, fields)
	}
}

// tomlFields maps toml key -> field index for a struct type.
func tomlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = i
	}
	return m
}

// decodeValue stores the TOML value v in rv, checking its type.
func (p *parser) decodeValue(path []string, v any, rv reflect.Value) {
	t := rv.Type()
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			p.problem(path, "", "must be a duration string such as \"60s\", not %s", typeName(v))
			p.markBad(path)
			return
		}
		s, ok = p.expand(path, "", s)
		if !ok {
			p.markBad(path)
			return
		}
		d, err := parseDuration(s)
		if err != nil {
			p.problem(path, "", "%v", err)
			p.markBad(path)
			return
		}
		rv.Set(reflect.ValueOf(Duration{d}))
		return
	}
	switch t.Kind() {
	case reflect.String:
		if s, ok := p.decodeString(path, "", v); ok {
			rv.SetString(s)
		}
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			p.typeProblem(path, "", "a boolean (true or false)", v)
			return
		}
		rv.SetBool(b)
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			p.typeProblem(path, "", "an integer", v)
			return
		}
		if int64(int(n)) != n {
			p.problem(path, "", "%d is out of range", n)
			p.markBad(path)
			return
		}
		rv.SetInt(n)
	case reflect.Float64:
		switch n := v.(type) {
		case float64:
			rv.SetFloat(n)
		case int64:
			rv.SetFloat(float64(n))
		default:
			p.typeProblem(path, "", "a number", v)
		}
	case reflect.Slice: // []string
		arr, ok := v.([]any)
		if !ok {
			p.typeProblem(path, "", "an array of strings", v)
			return
		}
		out := make([]string, 0, len(arr))
		good := true
		for i, e := range arr {
			s, ok := p.decodeString(path, fmt.Sprintf("%s[%d]", shown(path), i), e)
			good = good && ok
			out = append(out, s)
		}
		if !good {
			p.markBad(path)
			return
		}
		rv.Set(reflect.ValueOf(out))
	case reflect.Map:
		tbl, ok := v.(map[string]any)
		if !ok {
			p.typeProblem(path, "", "a table", v)
			return
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMapWithSize(t, len(tbl)))
		}
		for _, k := range slices.Sorted(maps.Keys(tbl)) {
			kp := sub(path, k)
			elem := reflect.New(t.Elem()).Elem()
			p.decodeValue(kp, tbl[k], elem)
			if t.Elem().Kind() == reflect.Struct {
				p.present[dotted(kp)] = true
			}
			rv.SetMapIndex(reflect.ValueOf(k), elem)
		}
	case reflect.Struct:
		tbl, ok := v.(map[string]any)
		if !ok {
			p.typeProblem(path, "", "a table", v)
			return
		}
		p.decodeTable(path, tbl, rv)
	default:
		// Unreachable for the types in this package; reported, never a panic.
		p.problem(path, "", "internal error: cannot decode into %s", t)
	}
}

func (p *parser) typeProblem(path []string, key, want string, v any) {
	p.problem(path, key, "must be %s, not %s", want, typeName(v))
	p.markBad(path)
}

// decodeString checks that v is a string and interpolates it. key is the key
// shown in problems ("" for shown(path)).
func (p *parser) decodeString(path []string, key string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		p.typeProblem(path, key, "a string", v)
		return "", false
	}
	return p.expand(path, key, s)
}

// expand interpolates s, the value at path. A secret that is exactly
// "${VAR}" with VAR unset and VAR_FILE set is read from that file later.
func (p *parser) expand(path []string, key, s string) (string, bool) {
	if key == "" {
		key = shown(path)
	}
	if isSecretKey(path) {
		if name, ok := soleReference(s); ok {
			fileVar := name + "_FILE"
			if file, ok := lookupEnv(p.env, fileVar); ok && file != "" {
				if _, set := lookupEnv(p.env, name); set {
					p.problem(path, key, "both %s and %s are set in the environment; unset one", name, fileVar)
					p.markBad(path)
					return "", false
				}
				p.pending = append(p.pending, pendingSecret{secret: path, path: path, shown: key, file: file, source: fileVar})
				return "", true
			}
		}
	}
	out, unset, err := interpolate(s, p.env)
	if err != nil {
		p.problem(path, key, "%v", err)
		p.markBad(path)
		return "", false
	}
	for _, name := range unset {
		p.unset = append(p.unset, unsetRef{path: path, key: key, name: name})
	}
	return out, true
}

// unknown warns about a key the schema does not have.
func (p *parser) unknown(path []string, fields map[string]int) {
	p.unknowns++
	if p.unknowns > maxUnknownWarnings {
		return
	}
	candidates := slices.Collect(maps.Keys(fields))
	for k := range fields {
		if isSecretKey(sub(path[:len(path)-1], k)) {
			candidates = append(candidates, k+fileSuffix)
		}
	}
	if s := suggest(path, candidates); s != "" {
		p.warn(path, "", "unknown key, ignored; did you mean %s?", s)
		return
	}
	p.warn(path, "", "unknown key, ignored")
}

// suggest returns a known key close to the unknown path, or "". It looks
// first in the same table (typos, case, '-' for '_'), then for the same name
// in another section.
func suggest(path []string, candidates []string) string {
	last := normalizeKey(path[len(path)-1])
	best, bestDist := "", 3
	slices.Sort(candidates)
	for _, c := range candidates {
		d := levenshtein(last, normalizeKey(c), bestDist)
		if d < bestDist && d <= len(last)/3+1 {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return fmt.Sprintf("%q", dotted(sub(path[:len(path)-1], best)))
	}
	if len(path) > 2 { // inside mcp_servers.NAME: other sections do not apply
		return ""
	}
	for _, k := range schemaKeys() {
		kp := strings.Split(k, ".")
		if normalizeKey(kp[len(kp)-1]) == last && k != dotted(path) {
			return fmt.Sprintf("%q", k)
		}
	}
	return ""
}

func normalizeKey(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}

// schemaKeys lists every "section.key" of Config, secret _file keys included.
func schemaKeys() []string {
	var keys []string
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		sec, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if sec == "" || sec == "-" || f.Type.Kind() != reflect.Struct {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(tomlFields(f.Type))) {
			keys = append(keys, sec+"."+k)
			if isSecretKey([]string{sec, k}) {
				keys = append(keys, sec+"."+k+fileSuffix)
			}
		}
	}
	return keys
}

// levenshtein returns the edit distance of a and b, or max if it is at
// least max.
func levenshtein(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= max {
			return max
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}

// typeName names the TOML type of a decoded value, with an article.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	}
	return fmt.Sprintf("a %T", v)
}
