package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SchemaFor derives the JSON schema of T, a struct, for Tool.Schema.
//
// Property names come from json tags (json:"-" and unexported fields are
// skipped; anonymous struct fields without a name are flattened), the
// description from a desc:"..." tag, and an enum from enum:"a,b,c". A field
// is required unless it is a pointer or tagged omitempty/omitzero. Strings,
// bools, integers, floats, slices and arrays, maps with string keys and
// nested structs are supported; interfaces, json.RawMessage and other types
// accept any value. Objects set additionalProperties false, matching Decode.
// It panics if T is not a struct: schemas are fixed at start-up.
func SchemaFor[T any]() json.RawMessage {
	return schemaOf(reflect.TypeFor[T]())
}

// SchemaWith is SchemaFor[T] with the descriptions of some top-level
// properties replaced: one argument type serving tools whose fields mean
// something else (a path relative to a user's folder, not the workspace).
func SchemaWith[T any](descs map[string]string) json.RawMessage {
	var s map[string]any
	if err := json.Unmarshal(SchemaFor[T](), &s); err != nil {
		panic("tools: schema: " + err.Error())
	}
	props, _ := s["properties"].(map[string]any)
	for name, desc := range descs {
		p, ok := props[name].(map[string]any)
		if !ok {
			panic(fmt.Sprintf("tools: schema of %v has no property %q", reflect.TypeFor[T](), name)) // programming error
		}
		p["description"] = desc
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	return b
}

// Schema is SchemaFor for the type of v (a struct or a pointer to one).
func Schema(v any) json.RawMessage {
	return schemaOf(reflect.TypeOf(v))
}

func schemaOf(t reflect.Type) json.RawMessage {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tools: schema of %v: not a struct", t))
	}
	b, err := json.Marshal(typeSchema(t, nil))
	if err != nil {
		panic("tools: schema: " + err.Error())
	}
	return b
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	durationType   = reflect.TypeFor[time.Duration]()
)

// field is one JSON property of a struct.
type field struct {
	name     string
	index    []int
	typ      reflect.Type
	required bool
	desc     string
	enum     string
}

// structFields lists the JSON properties of struct type t, flattening
// untagged anonymous structs the way encoding/json does (first name wins).
func structFields(t reflect.Type) []field {
	var out []field
	seen := map[string]bool{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			ft := sf.Type
			if sf.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					walk(et, idx)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			optional := ft.Kind() == reflect.Pointer || strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
			out = append(out, field{name: name, index: idx, typ: ft, required: !optional, desc: sf.Tag.Get("desc"), enum: sf.Tag.Get("enum")})
		}
	}
	walk(t, nil)
	return out
}

func typeSchema(t reflect.Type, stack []reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case rawMessageType:
		return map[string]any{}
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case durationType:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s := map[string]any{"type": "integer"}
		if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
			s["minimum"] = 0
		}
		return s
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), stack)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), stack)}
	case reflect.Struct:
		if slices.Contains(stack, t) {
			return map[string]any{"type": "object"} // recursive type
		}
		stack = append(stack, t)
		props := map[string]any{}
		required := []string{}
		for _, f := range structFields(t) {
			s := typeSchema(f.typ, stack)
			if f.desc != "" {
				s["description"] = f.desc
			}
			if f.enum != "" {
				s["enum"] = enumValues(f.enum, s["type"])
			}
			props[f.name] = s
			if f.required {
				required = append(required, f.name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	default:
		return map[string]any{}
	}
}

func enumValues(tag string, typ any) []any {
	var out []any
	for v := range strings.SplitSeq(tag, ",") {
		v = strings.TrimSpace(v)
		switch typ {
		case "integer":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out = append(out, n)
				continue
			}
		case "number":
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				out = append(out, n)
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

// Decode parses tool arguments into T, a struct. It rejects what is not a
// JSON object, unknown fields, values of the wrong type, missing required
// fields (see SchemaFor; null counts as missing) and values outside an enum
// tag, with messages the model can act on. Empty args are taken as {}.
func Decode[T any](args json.RawMessage) (T, error) {
	var v T
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	t := reflect.TypeFor[T]()
	if !json.Valid(args) {
		return v, errors.New("arguments are not valid JSON; send one JSON object matching the tool's schema")
	}
	var raw any
	if err := json.Unmarshal(args, &raw); err != nil {
		return v, fmt.Errorf("arguments: %v", err)
	}
	if err := checkValue(t, raw, ""); err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			name := te.Field
			if name == "" {
				name = "arguments"
			}
			return v, fmt.Errorf("argument %q must be %s, got a JSON %s", name, describeType(te.Type), te.Value)
		}
		return v, fmt.Errorf("arguments: %v", err)
	}
	return v, nil
}

// checkValue walks the decoded JSON against t, reporting unknown or missing
// fields, type mismatches of objects and bad enum values with their path.
func checkValue(t reflect.Type, v any, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	label := path
	if label == "" {
		label = "arguments"
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == timeType {
			return nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			if v == nil && path != "" {
				return nil
			}
			return fmt.Errorf("%s must be a JSON object, got %s", quoteLabel(path, label), jsonType(v))
		}
		fields := structFields(t)
		known := make([]string, len(fields))
		for i, f := range fields {
			known[i] = f.name
		}
		for k := range obj {
			if !slices.Contains(known, k) {
				return fmt.Errorf("unknown argument %q; allowed: %s", join(path, k), strings.Join(known, ", "))
			}
		}
		var missing []string
		for _, f := range fields {
			fv, ok := obj[f.name]
			if f.required && (!ok || fv == nil) {
				missing = append(missing, join(path, f.name))
				continue
			}
			if !ok || fv == nil {
				continue
			}
			if f.enum != "" {
				vals := strings.Split(f.enum, ",")
				s := fmt.Sprint(fv)
				if !slices.ContainsFunc(vals, func(e string) bool { return strings.TrimSpace(e) == s }) {
					return fmt.Errorf("argument %q must be one of %s, got %s", join(path, f.name), strings.Join(vals, ", "), s)
				}
			}
			if err := checkValue(f.typ, fv, join(path, f.name)); err != nil {
				return err
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing required argument(s): %s", strings.Join(missing, ", "))
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return nil // the decoder reports the type error
		}
		for i, e := range arr {
			if err := checkValue(t.Elem(), e, fmt.Sprintf("%s[%d]", label, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for k, e := range obj {
			if err := checkValue(t.Elem(), e, join(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func quoteLabel(path, label string) string {
	if path == "" {
		return label
	}
	return strconv.Quote(path)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
