package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// secretTag marks the fields of Config's types whose values are secrets.
// The tags are the only list of them: Redacted masks, Secrets lists, and
// Parse offers KEY_file and VAR_FILE for, exactly what they mark.
//
//	secret:"true"    a string that is a secret: a secret key, which also
//	                 accepts KEY_file, and whose "${VAR}" honours VAR_FILE
//	secret:"values"  a map[string]string whose every value is a secret
//	secret:"url"     a URL whose password, when it has one, is a secret
//
// Any other value, or one of these on a field of another type, is a
// programming error: the first use of the tags panics (every test of this
// package catches it).
const secretTag = "secret"

type secretKind uint8

const (
	notSecret    secretKind = iota
	secretString            // secret:"true"
	secretValues            // secret:"values"
	secretURL               // secret:"url"
)

// secretSchema is what the secret tags of a configuration type say.
type secretSchema struct {
	// kinds holds, for each struct type reachable from the root through
	// structs and maps, the secretKind of each of its fields by index.
	kinds map[reflect.Type][]secretKind
	// keys are the TOML key paths of the secret keys (secret:"true"),
	// in field order; "*" stands for any key of a map (a name in
	// mcp_servers.NAME).
	keys [][]string
}

// configSecrets reads Config's tags once.
var configSecrets = sync.OnceValue(func() *secretSchema {
	return newSecretSchema(reflect.TypeFor[Config]())
})

// newSecretSchema reads the secret tags of root, a struct type, and of the
// structs it holds directly or as map values.
func newSecretSchema(root reflect.Type) *secretSchema {
	s := &secretSchema{kinds: map[reflect.Type][]secretKind{}}
	var walk func(t reflect.Type, path []string)
	walk = func(t reflect.Type, path []string) {
		kinds := make([]secretKind, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			kinds[i] = secretKindOf(t, f)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				if kinds[i] != notSecret {
					panic(fmt.Sprintf("config: %s.%s is tagged %s:%q but is no TOML key", t, f.Name, secretTag, f.Tag.Get(secretTag)))
				}
				continue
			}
			key := sub(path, name)
			switch ft := f.Type; {
			case kinds[i] == secretString:
				s.keys = append(s.keys, key)
			case kinds[i] != notSecret:
			case ft.Kind() == reflect.Struct && ft != durationType:
				walk(ft, key)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), sub(key, "*"))
			}
		}
		s.kinds[t] = kinds
	}
	walk(root, nil)
	return s
}

func secretKindOf(t reflect.Type, f reflect.StructField) secretKind {
	tag, ok := f.Tag.Lookup(secretTag)
	if !ok {
		return notSecret
	}
	isString := f.Type.Kind() == reflect.String
	switch {
	case tag == "true" && isString:
		return secretString
	case tag == "url" && isString:
		return secretURL
	case tag == "values" && f.Type.Kind() == reflect.Map &&
		f.Type.Key().Kind() == reflect.String && f.Type.Elem().Kind() == reflect.String:
		return secretValues
	}
	panic(fmt.Sprintf("config: %s.%s (%s) has tag %s:%q; want \"true\" or \"url\" on a string, \"values\" on a map[string]string",
		t, f.Name, f.Type, secretTag, tag))
}

// isKey reports whether path (TOML keys) names a secret key.
func (s *secretSchema) isKey(path []string) bool {
	return slices.ContainsFunc(s.keys, func(k []string) bool {
		return slices.EqualFunc(k, path, func(want, got string) bool { return want == "*" || want == got })
	})
}

// kind is the secretKind of field i of the struct type t.
func (s *secretSchema) kind(t reflect.Type, i int) secretKind {
	if k := s.kinds[t]; k != nil {
		return k[i]
	}
	return notSecret
}

// each calls fn with every secret value in v (a value of the root type or
// of a type inside it), empty ones included.
func (s *secretSchema) each(v reflect.Value, fn func(string)) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			switch s.kind(v.Type(), i) {
			case secretString:
				fn(f.String())
			case secretValues:
				for it := f.MapRange(); it.Next(); {
					fn(it.Value().String())
				}
			case secretURL:
				if pw, ok := urlPassword(f.String()); ok {
					fn(pw)
				}
			default:
				if v.Type().Field(i).IsExported() {
					s.each(f, fn)
				}
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			s.each(it.Value(), fn)
		}
	}
}

// redact returns a deep copy of v (no map or slice shared with it) with
// its secrets masked; kind is how v itself is tagged.
func (s *secretSchema) redact(v reflect.Value, kind secretKind) reflect.Value {
	t := v.Type()
	switch kind {
	case secretString:
		return reflect.ValueOf(mask(v.String())).Convert(t)
	case secretURL:
		return reflect.ValueOf(redactURL(v.String())).Convert(t)
	case secretValues:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), reflect.ValueOf(mask(it.Value().String())).Convert(t.Elem()))
		}
		return out
	}
	switch v.Kind() {
	case reflect.Struct:
		out := reflect.New(t).Elem()
		out.Set(v) // unexported fields as they are
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				out.Field(i).Set(s.redact(v.Field(i), s.kind(t, i)))
			}
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), s.redact(it.Value(), notSecret))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(s.redact(v.Index(i), notSecret))
		}
		return out
	}
	return v
}

// setString stores s in the string at the TOML key path inside v, a
// settable struct: through struct fields and existing map entries. A path
// that leads nowhere stores nothing.
func setString(v reflect.Value, path []string, s string) {
	switch v.Kind() {
	case reflect.String:
		if len(path) == 0 {
			v.SetString(s)
		}
	case reflect.Struct:
		if len(path) == 0 {
			return
		}
		if i, ok := tomlFields(v.Type())[path[0]]; ok {
			setString(v.Field(i), path[1:], s)
		}
	case reflect.Map:
		if len(path) == 0 || v.IsNil() {
			return
		}
		k := reflect.ValueOf(path[0]).Convert(v.Type().Key())
		e := v.MapIndex(k)
		if !e.IsValid() {
			return
		}
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		setString(c, path[1:], s)
		v.SetMapIndex(k, c)
	}
}
