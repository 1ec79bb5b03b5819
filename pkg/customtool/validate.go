package customtool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"agent/pkg/invisible"
)

// Bounds of what create_tool accepts.
const (
	MaxCode        = 64 << 10 // a whole program; it travels in one argv entry (128 KiB max)
	MaxDescription = 1024
	MaxSchema      = 8 << 10
	maxSchemaDepth = 6
	maxProperties  = 32
)

// ErrInvalid is wrapped by the checks: the message says what to change.
var ErrInvalid = errors.New("invalid tool")

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{1,47}$`)

// pyKeywords cannot name a Python function (def NAME).
var pyKeywords = []string{"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
	"elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
	"nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "match", "case", "type"}

// CheckName says whether name can name a custom tool: lower case letters,
// digits and single underscores, starting with a letter, 2 to 48
// characters. "__" is refused: MCP tools are SERVER__TOOL.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: name %q: use 2-48 lower-case letters, digits and _ , starting with a letter (like convert_units)", ErrInvalid, name)
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("%w: name %q: \"__\" is reserved for MCP tools (SERVER__TOOL)", ErrInvalid, name)
	}
	if slices.Contains(pyKeywords, name) {
		return fmt.Errorf("%w: name %q is a Python keyword", ErrInvalid, name)
	}
	return nil
}

var propRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)

var jsonTypes = []string{"string", "number", "integer", "boolean", "array", "object", "null"}

// CheckSchema checks that s is an argument schema LLM APIs accept: a JSON
// object schema ("type": "object") whose properties are named like
// identifiers (they become Python keyword arguments and ARG_ variables),
// each with a known type (arrays with items), "required" naming only
// properties, no "$ref", at most 8 KiB and 6 levels deep.
func CheckSchema(s json.RawMessage) error {
	s = bytes.TrimSpace(s)
	if len(s) == 0 {
		return fmt.Errorf("%w: parameters is missing: give a JSON schema object such as {\"type\":\"object\",\"properties\":{}}", ErrInvalid)
	}
	if len(s) > MaxSchema {
		return fmt.Errorf("%w: parameters is %d bytes; at most %d", ErrInvalid, len(s), MaxSchema)
	}
	var whole any
	if err := json.Unmarshal(s, &whole); err != nil {
		return fmt.Errorf("%w: parameters must be a JSON object (a JSON schema)", ErrInvalid)
	}
	if at, f, ok := findInvisible(whole, "parameters", 0); ok {
		return fmt.Errorf("%w: %s has %s; remove it", ErrInvalid, at, f)
	}
	if hasKey(whole, "$ref", 0) {
		return fmt.Errorf("%w: parameters: $ref is not supported; write the schema out", ErrInvalid)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(s, &top); err != nil || top == nil {
		return fmt.Errorf("%w: parameters must be a JSON object (a JSON schema)", ErrInvalid)
	}
	if typeOf(top["type"]) != "object" {
		return fmt.Errorf("%w: parameters must have \"type\": \"object\"", ErrInvalid)
	}
	props, err := properties(top)
	if err != nil {
		return err
	}
	for name := range props {
		if !propRE.MatchString(name) {
			return fmt.Errorf("%w: parameter name %q: use letters, digits and _ (an identifier)", ErrInvalid, name)
		}
	}
	return checkNode(top, "parameters", 0)
}

// findInvisible finds the first invisible character in the keys and
// strings of v (decoded JSON: a "\u200b" escape counts), with where.
func findInvisible(v any, at string, depth int) (string, invisible.Found, bool) {
	if depth > 64 {
		return "", invisible.Found{}, false // refused by hasKey
	}
	switch x := v.(type) {
	case string:
		f, ok := invisible.Find(x)
		return at, f, ok
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if f, ok := invisible.Find(k); ok {
				return at + " (a key)", f, true
			}
			if w, f, ok := findInvisible(x[k], at+"."+k, depth+1); ok {
				return w, f, true
			}
		}
	case []any:
		for i, c := range x {
			if w, f, ok := findInvisible(c, fmt.Sprintf("%s[%d]", at, i), depth+1); ok {
				return w, f, true
			}
		}
	}
	return "", invisible.Found{}, false
}

func properties(node map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	raw, ok := node["properties"]
	if !ok {
		return nil, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil || props == nil {
		return nil, fmt.Errorf("%w: \"properties\" must be an object of schemas", ErrInvalid)
	}
	if len(props) > maxProperties {
		return nil, fmt.Errorf("%w: %d properties; at most %d", ErrInvalid, len(props), maxProperties)
	}
	return props, nil
}

// hasKey reports whether key is a key of any object in v (decoded JSON).
func hasKey(v any, key string, depth int) bool {
	if depth > 64 {
		return true // deeper than any schema we take: refuse
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if k == key || hasKey(c, key, depth+1) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if hasKey(c, key, depth+1) {
				return true
			}
		}
	}
	return false
}

func checkNode(node map[string]json.RawMessage, at string, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("%w: %s: nested deeper than %d levels", ErrInvalid, at, maxSchemaDepth)
	}
	typ, hasType := node["type"]
	enum, hasEnum := node["enum"]
	hasAlt := false
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		raw, ok := node[k]
		if !ok {
			continue
		}
		hasAlt = true
		var alts []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &alts); err != nil || len(alts) == 0 {
			return fmt.Errorf("%w: %s: %q must be a non-empty list of schemas", ErrInvalid, at, k)
		}
		for i, alt := range alts {
			if alt == nil {
				return fmt.Errorf("%w: %s.%s[%d] must be a schema object", ErrInvalid, at, k, i)
			}
			if err := checkNode(alt, fmt.Sprintf("%s.%s[%d]", at, k, i), depth+1); err != nil {
				return err
			}
		}
	}
	if hasEnum {
		var vals []json.RawMessage
		if err := json.Unmarshal(enum, &vals); err != nil || len(vals) == 0 {
			return fmt.Errorf("%w: %s: \"enum\" must be a non-empty list", ErrInvalid, at)
		}
	}
	if !hasType && !hasEnum && !hasAlt {
		return fmt.Errorf("%w: %s has no \"type\"", ErrInvalid, at)
	}
	var types []string
	if hasType {
		var one string
		if err := json.Unmarshal(typ, &one); err == nil {
			types = []string{one}
		} else if err := json.Unmarshal(typ, &types); err != nil || len(types) == 0 {
			return fmt.Errorf("%w: %s: \"type\" must be a string or a non-empty list of strings", ErrInvalid, at)
		}
		for _, t := range types {
			if !slices.Contains(jsonTypes, t) {
				return fmt.Errorf("%w: %s: unknown type %q (one of %s)", ErrInvalid, at, t, strings.Join(jsonTypes, ", "))
			}
		}
	}
	if d, ok := node["description"]; ok {
		var s string
		if json.Unmarshal(d, &s) != nil {
			return fmt.Errorf("%w: %s: \"description\" must be a string", ErrInvalid, at)
		}
	}
	if slices.Contains(types, "object") {
		props, err := properties(node)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		for name, raw := range props {
			var child map[string]json.RawMessage
			if err := json.Unmarshal(raw, &child); err != nil || child == nil {
				return fmt.Errorf("%w: %s.%s must be a schema object", ErrInvalid, at, name)
			}
			if err := checkNode(child, at+"."+name, depth+1); err != nil {
				return err
			}
		}
		if rq, ok := node["required"]; ok {
			var req []string
			if err := json.Unmarshal(rq, &req); err != nil {
				return fmt.Errorf("%w: %s: \"required\" must be a list of property names", ErrInvalid, at)
			}
			for _, r := range req {
				if _, ok := props[r]; !ok {
					return fmt.Errorf("%w: %s: required %q is not among the properties", ErrInvalid, at, r)
				}
			}
		}
	}
	if slices.Contains(types, "array") {
		raw, ok := node["items"]
		if !ok {
			return fmt.Errorf("%w: %s: an array needs \"items\"", ErrInvalid, at)
		}
		var child map[string]json.RawMessage
		if err := json.Unmarshal(raw, &child); err != nil || child == nil {
			return fmt.Errorf("%w: %s.items must be a schema object", ErrInvalid, at)
		}
		if err := checkNode(child, at+"[]", depth+1); err != nil {
			return err
		}
	}
	return nil
}

func typeOf(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// CheckDef checks a definition's description, code and language.
func CheckDef(description, code, language string) error {
	switch {
	case strings.TrimSpace(description) == "":
		return fmt.Errorf("%w: description is empty: say what the tool does and what it returns", ErrInvalid)
	case len(description) > MaxDescription:
		return fmt.Errorf("%w: description is %d bytes; at most %d", ErrInvalid, len(description), MaxDescription)
	case strings.TrimSpace(code) == "":
		return fmt.Errorf("%w: code is empty", ErrInvalid)
	case len(code) > MaxCode:
		return fmt.Errorf("%w: code is %d bytes; at most %d", ErrInvalid, len(code), MaxCode)
	case !utf8.ValidString(code) || !utf8.ValidString(description):
		return fmt.Errorf("%w: code and description must be UTF-8 text", ErrInvalid)
	}
	if f, ok := invisible.Find(code); ok {
		return fmt.Errorf("%w: code has %s: it can hide what the code does from whoever reviews it; remove it (write such a character as an escape like \\u200b)", ErrInvalid, f)
	}
	if f, ok := invisible.Find(description); ok {
		return fmt.Errorf("%w: description has %s; remove it", ErrInvalid, f)
	}
	if language != LangPython && language != LangShell {
		return fmt.Errorf("%w: language %q: python or sh", ErrInvalid, language)
	}
	return nil
}

// Languages a tool may be written in.
const (
	LangPython = "python"
	LangShell  = "sh"
)

// Hidden names the first invisible character (pkg/invisible) in v's
// description, code or parameters: "U+E0041 TAG LATIN CAPITAL LETTER A
// (a tag character) on line 1 of its description"; "" when there is none.
// create_tool refuses them; a version stored before it did is not offered
// until an owner approves it again, shown escaped.
func (v Version) Hidden() string {
	if f, ok := invisible.Find(v.Description); ok {
		return f.String() + " of its description"
	}
	if f, ok := invisible.Find(v.Code); ok {
		return f.String() + " of its code"
	}
	var whole any
	if json.Unmarshal(v.Parameters, &whole) == nil {
		if at, f, ok := findInvisible(whole, "parameters", 0); ok {
			return fmt.Sprintf("%s in %s", invisible.Describe(f.Rune), at)
		}
	} else if f, ok := invisible.Find(string(v.Parameters)); ok {
		return invisible.Describe(f.Rune) + " in its parameters"
	}
	return ""
}
