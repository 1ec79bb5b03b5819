package tools

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

type basicArgs struct {
	Name    string  `json:"name" desc:"who to greet"`
	Count   int     `json:"count,omitempty"`
	Ratio   float64 `json:"ratio"`
	Loud    bool    `json:"loud"`
	Small   uint8   `json:"small,omitempty"`
	Note    *string `json:"note" desc:"optional note"`
	Skipped string  `json:"-"`
	//lint:ignore U1000 present to check that unexported fields are skipped
	hidden string
	NoTag  string
}

type enumArgs struct {
	Mode  string   `json:"mode" enum:"fast,slow" desc:"speed"`
	Level int      `json:"level,omitempty" enum:"1,2,3"`
	Tags  []string `json:"tags,omitempty"`
}

type inner struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type Embedded struct {
	Trace bool `json:"trace,omitempty"`
}

type nestedArgs struct {
	Embedded
	Home    inner             `json:"home"`
	Others  []inner           `json:"others,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Matrix  [][]float64       `json:"matrix,omitempty"`
	Extra   json.RawMessage   `json:"extra,omitempty"`
	Any     any               `json:"any,omitempty"`
	When    time.Time         `json:"when,omitzero"`
	Blob    []byte            `json:"blob,omitempty"`
	Pointer *inner            `json:"pointer"`
}

type recursive struct {
	Name     string       `json:"name"`
	Children []*recursive `json:"children,omitempty"`
}

func TestSchemaGolden(t *testing.T) {
	tests := []struct {
		name string
		got  json.RawMessage
	}{
		{"basic", SchemaFor[basicArgs]()},
		{"enum", SchemaFor[enumArgs]()},
		{"nested", SchemaFor[nestedArgs]()},
		{"recursive", Schema(&recursive{})},
		{"empty", SchemaFor[struct{}]()},
		{"read_file", SchemaFor[ReadFileArgs]()},
		{"edit_file", SchemaFor[EditFileArgs]()},
		{"list_files", SchemaFor[ListFilesArgs]()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkObjectSchema(tt.got); err != nil {
				t.Fatalf("derived schema is not an object schema: %v", err)
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, tt.got, "", "  "); err != nil {
				t.Fatal(err)
			}
			buf.WriteByte('\n')
			file := filepath.Join("testdata", "schema", tt.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got := buf.String(); got != string(want) {
				t.Errorf("schema %s:\ngot:\n%s\nwant:\n%s", tt.name, got, want)
			}
		})
	}
}

func TestSchemaPanicsOnNonStruct(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("SchemaFor[int] did not panic")
		}
	}()
	SchemaFor[int]()
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, args string
		wantErr    string
	}{
		{"ok", `{"name":"a","ratio":1.5,"loud":true,"note":null,"NoTag":"x"}`, ""},
		{"empty means {}", ``, "missing required argument(s): name, ratio, loud, NoTag"},
		{"missing", `{"name":"a","loud":false,"NoTag":""}`, "missing required argument(s): ratio"},
		{"null required", `{"name":null,"ratio":1,"loud":true,"NoTag":""}`, "missing required argument(s): name"},
		{"unknown", `{"name":"a","ratio":1,"loud":true,"NoTag":"","colour":"red"}`, `unknown argument "colour"; allowed: name, count, ratio, loud, small, note, NoTag`},
		{"hidden field unknown", `{"name":"a","ratio":1,"loud":true,"NoTag":"","Skipped":"x"}`, `unknown argument "Skipped"`},
		{"wrong type", `{"name":5,"ratio":1,"loud":true,"NoTag":""}`, `argument "name" must be a string, got a JSON number`},
		{"wrong bool", `{"name":"a","ratio":1,"loud":"yes","NoTag":""}`, `argument "loud" must be a boolean (true or false), got a JSON string`},
		{"negative uint", `{"name":"a","ratio":1,"loud":true,"NoTag":"","small":-1}`, `argument "small" must be a non-negative integer`},
		{"float for int", `{"name":"a","ratio":1,"loud":true,"NoTag":"","count":1.5}`, `argument "count" must be an integer`},
		{"array", `[]`, "arguments must be a JSON object, got an array"},
		{"invalid", `{"name":`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Decode[basicArgs](json.RawMessage(tt.args))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if v.Name != "a" || v.Ratio != 1.5 || !v.Loud || v.Note != nil || v.NoTag != "x" {
					t.Fatalf("Decode = %+v", v)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode error = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodeNestedAndEnum(t *testing.T) {
	tests := []struct {
		name, args, wantErr string
		decode              func(json.RawMessage) error
	}{
		{"enum ok", `{"mode":"fast","level":2}`, "", decodeAs[enumArgs]},
		{"enum bad", `{"mode":"medium"}`, `argument "mode" must be one of fast, slow, got medium`, decodeAs[enumArgs]},
		{"enum int bad", `{"mode":"slow","level":7}`, `argument "level" must be one of 1, 2, 3, got 7`, decodeAs[enumArgs]},
		{"nested ok", `{"home":{"city":"Bonn"},"pointer":null,"others":[{"city":"x"}],"labels":{"a":"b"}}`, "", decodeAs[nestedArgs]},
		{"nested missing", `{"home":{},"pointer":null}`, "missing required argument(s): home.city", decodeAs[nestedArgs]},
		{"nested in slice", `{"home":{"city":"a"},"pointer":null,"others":[{"zip":"1"}]}`, "missing required argument(s): others[0].city", decodeAs[nestedArgs]},
		{"nested unknown", `{"home":{"city":"a","street":"b"},"pointer":null}`, `unknown argument "home.street"; allowed: city, zip`, decodeAs[nestedArgs]},
		{"nested not object", `{"home":"Bonn","pointer":null}`, `"home" must be a JSON object, got a string`, decodeAs[nestedArgs]},
		{"embedded field", `{"home":{"city":"a"},"pointer":null,"trace":true}`, "", decodeAs[nestedArgs]},
		{"map value type", `{"home":{"city":"a"},"pointer":null,"labels":{"a":1}}`, `must be a string`, decodeAs[nestedArgs]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(json.RawMessage(tt.args))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Decode error = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func decodeAs[T any](args json.RawMessage) error {
	_, err := Decode[T](args)
	return err
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"home":{"city":"a"},"pointer":null}`, `[`, `{"others":[1,{"x":2}]}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Decode[nestedArgs](json.RawMessage(s))
		_, _ = Decode[basicArgs](json.RawMessage(s))
	})
}

func TestSchemaWithReplacesDescriptions(t *testing.T) {
	var got struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(SchemaWith[EditFileArgs](map[string]string{"path": "relative to your folder"}), &got); err != nil {
		t.Fatal(err)
	}
	if got.Properties["path"].Description != "relative to your folder" || got.Properties["old_text"].Description == "" ||
		len(got.Required) != 3 {
		t.Errorf("schema %+v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a description for a property the type lacks was accepted")
		}
	}()
	SchemaWith[EditFileArgs](map[string]string{"paht": "typo"})
}
