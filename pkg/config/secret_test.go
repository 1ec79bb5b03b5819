package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// taggedField is a field with a secret tag, found by taggedFields: its TOML
// key path ("x" for the key of a map) and the tag.
type taggedField struct {
	path []string
	tag  string
}

// taggedFields walks t on its own (not through secretSchema) through
// structs and maps of structs.
func taggedFields(t reflect.Type, path []string) []taggedField {
	var out []taggedField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag, ok := f.Tag.Lookup(secretTag); ok {
			out = append(out, taggedField{sub(path, name), tag})
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, taggedFields(f.Type, sub(path, name))...)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, taggedFields(f.Type.Elem(), sub(sub(path, name), "x"))...)
		}
	}
	return out
}

// setAt stores val at the TOML key path inside v, a settable struct,
// creating map entries on the way.
func setAt(t *testing.T, v reflect.Value, path []string, val reflect.Value) {
	t.Helper()
	if len(path) == 0 {
		v.Set(val)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		i, ok := tomlFields(v.Type())[path[0]]
		if !ok {
			t.Fatalf("no field %q in %s", path[0], v.Type())
		}
		setAt(t, v.Field(i), path[1:], val)
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		k := reflect.ValueOf(path[0])
		e := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(k); old.IsValid() {
			e.Set(old)
		}
		setAt(t, e, path[1:], val)
		v.SetMapIndex(k, e)
	default:
		t.Fatalf("cannot descend into %s at %q", v.Type(), path)
	}
}

// TestEveryTaggedFieldIsSecret puts a marker into each field of Config
// that carries a secret tag: Secrets must list it, Redacted must hide it,
// and a secret key must accept KEY_file. A field tagged later is covered
// without any edit here.
func TestEveryTaggedFieldIsSecret(t *testing.T) {
	fields := taggedFields(reflect.TypeFor[Config](), nil)
	if len(fields) == 0 {
		t.Fatal("no field of Config has a secret tag")
	}
	for _, f := range fields {
		key := dotted(f.path)
		t.Run(key, func(t *testing.T) {
			marker := "marker-" + strings.ReplaceAll(key, ".", "-")
			var val any
			switch f.tag {
			case "true":
				val = marker
			case "url":
				val = "https://user:" + marker + "@example.com/v1"
			case "values":
				val = map[string]string{"K": marker}
			default:
				t.Fatalf("tag %s:%q: not one secretTag documents", secretTag, f.tag)
			}
			cfg := Default()
			setAt(t, reflect.ValueOf(cfg).Elem(), f.path, reflect.ValueOf(val))
			if got := cfg.Secrets(); !slices.Contains(got, marker) {
				t.Errorf("Secrets() = %q, lacks %q", got, marker)
			}
			if out := cfg.Redacted(); strings.Contains(out, marker) {
				t.Errorf("Redacted() shows %q:\n%s", marker, out)
			}
			if f.tag != "true" {
				return
			}
			if !isSecretKey(f.path) {
				t.Errorf("isSecretKey(%q) = false", f.path)
			}
			if len(f.path) != 2 {
				return // inside a map: a [section.NAME] table needs more keys to parse
			}
			if !slices.Contains(schemaKeys(), key+fileSuffix) {
				t.Errorf("schemaKeys() lacks %s", key+fileSuffix)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "secret"), marker+"\n")
			fileKey := sub(f.path[:1], f.path[1]+fileSuffix)
			cfg, warns, err := parseIn(dir, fmt.Sprintf("[%s]\n%s = \"secret\"\n", f.path[0], f.path[1]+fileSuffix), nil)
			if err != nil {
				t.Fatalf("%s: %v", dotted(fileKey), err)
			}
			if w, ok := findWarning(warns, dotted(fileKey)); ok {
				t.Errorf("%s: %v", dotted(fileKey), w)
			}
			if !matters(cfg, fileKey) {
				return // a disabled section's files are not read
			}
			got := reflect.ValueOf(cfg).Elem()
			for _, k := range f.path {
				got = got.Field(tomlFields(got.Type())[k])
			}
			if got.String() != marker {
				t.Errorf("%s = %q, want the file's %q", key, got.String(), marker)
			}
		})
	}
}

// A configuration type with fields of every kind of secret, at the top
// level and inside a map of tables.
type secretTestConfig struct {
	Sec struct {
		Plain string `toml:"plain"`
		Key   string `toml:"key" secret:"true"`
		URL   string `toml:"url" secret:"url"`
	} `toml:"sec"`
	Servers map[string]secretTestServer `toml:"servers"`
	hidden  string
}

type secretTestServer struct {
	Args  []string          `toml:"args"`
	Env   map[string]string `toml:"env" secret:"values"`
	Token string            `toml:"token" secret:"true"`
}

// TestSecretSchema: a new tagged field needs nothing but its tag.
func TestSecretSchema(t *testing.T) {
	s := newSecretSchema(reflect.TypeFor[secretTestConfig]())
	if want := [][]string{{"sec", "key"}, {"servers", "*", "token"}}; !reflect.DeepEqual(s.keys, want) {
		t.Errorf("keys = %q, want %q", s.keys, want)
	}
	for _, tt := range []struct {
		path []string
		want bool
	}{
		{[]string{"sec", "key"}, true},
		{[]string{"sec", "plain"}, false},
		{[]string{"sec", "url"}, false},
		{[]string{"servers", "a", "token"}, true},
		{[]string{"servers", "a", "env"}, false},
		{[]string{"servers", "token"}, false},
		{[]string{"sec"}, false},
	} {
		if got := s.isKey(tt.path); got != tt.want {
			t.Errorf("isKey(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}

	var c secretTestConfig
	c.Sec.Plain, c.Sec.Key, c.Sec.URL = "plain", "key-secret", "https://u:url-secret@host/"
	c.Servers = map[string]secretTestServer{
		"a": {Args: []string{"arg"}, Env: map[string]string{"E": "env-secret", "EMPTY": ""}, Token: "token-secret"},
	}
	c.hidden = "hidden"
	var got []string
	s.each(reflect.ValueOf(&c).Elem(), func(v string) { got = append(got, v) })
	slices.Sort(got)
	if want := []string{"", "env-secret", "key-secret", "token-secret", "url-secret"}; !slices.Equal(got, want) {
		t.Errorf("each: %q, want %q", got, want)
	}

	r := s.redact(reflect.ValueOf(&c).Elem(), notSecret).Interface().(secretTestConfig)
	var want secretTestConfig
	want.Sec.Plain, want.Sec.Key, want.Sec.URL = "plain", Mask, "https://u:"+Mask+"@host/"
	want.Servers = map[string]secretTestServer{
		"a": {Args: []string{"arg"}, Env: map[string]string{"E": Mask, "EMPTY": ""}, Token: Mask},
	}
	want.hidden = "hidden"
	if !reflect.DeepEqual(r, want) {
		t.Errorf("redact:\n got %+v\nwant %+v", r, want)
	}
	r.Servers["a"].Args[0] = "changed"
	if c.Servers["a"].Args[0] != "arg" || c.Sec.Key != "key-secret" || c.Servers["a"].Env["E"] != "env-secret" {
		t.Errorf("redact shares memory with or changed its input: %+v", c)
	}

	setString(reflect.ValueOf(&c).Elem(), []string{"servers", "a", "token"}, "from-file")
	setString(reflect.ValueOf(&c).Elem(), []string{"servers", "missing", "token"}, "nowhere")
	setString(reflect.ValueOf(&c).Elem(), []string{"sec", "key"}, "key-from-file")
	if c.Servers["a"].Token != "from-file" || c.Sec.Key != "key-from-file" || len(c.Servers) != 1 {
		t.Errorf("setString: %+v", c)
	}
}

func TestSecretTagMisuse(t *testing.T) {
	tests := map[string]reflect.Type{
		"unknown value": reflect.TypeFor[struct {
			S string `toml:"s" secret:"yes"`
		}](),
		"true on an int": reflect.TypeFor[struct {
			N int `toml:"n" secret:"true"`
		}](),
		"values on a string": reflect.TypeFor[struct {
			S string `toml:"s" secret:"values"`
		}](),
		"url on a map": reflect.TypeFor[struct {
			M map[string]string `toml:"m" secret:"url"`
		}](),
		"no TOML key": reflect.TypeFor[struct {
			S string `toml:"-" secret:"true"`
		}](),
		"nested": reflect.TypeFor[struct {
			Sec struct {
				S []string `toml:"s" secret:"true"`
			} `toml:"sec"`
		}](),
	}
	for name, typ := range tests {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("newSecretSchema(%s) did not panic", typ)
				} else {
					t.Log(r)
				}
			}()
			newSecretSchema(typ)
		})
	}
}
