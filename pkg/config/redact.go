package config

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// Mask replaces a non-empty secret in Redacted output.
const Mask = "***"

func mask(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}

// Redacted returns the effective configuration as TOML with every secret
// the struct tags mark (see Secrets in the package documentation) replaced
// by "***" (an empty one stays ""; of a URL only the password). The output
// decodes back into a Config equal to the input but for those values.
func (c *Config) Redacted() string {
	r := c.redactedCopy()
	var b bytes.Buffer
	b.WriteString("# Effective configuration; secrets are shown as \"" + Mask + "\".\n")
	if c.Path != "" {
		fmt.Fprintf(&b, "# Loaded from %s\n", strings.Join(strings.FieldsFunc(c.Path, isLineBreak), " "))
	}
	b.WriteString("\n")
	validUTF8(reflect.ValueOf(r).Elem())
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(r); err != nil {
		// Only unencodable values (never produced by Parse) get here.
		return fmt.Sprintf("# cannot encode the configuration: %s\n", strings.Join(strings.FieldsFunc(err.Error(), isLineBreak), " "))
	}
	return b.String()
}

func isLineBreak(r rune) bool { return r == '\n' || r == '\r' }

// validUTF8 replaces invalid UTF-8 (which only an environment variable can
// bring in) in every string reachable from v, so that the output is TOML.
// v must be settable and hold no shared maps or slices.
func validUTF8(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !utf8.ValidString(s) {
			v.SetString(strings.ToValidUTF8(s, "\uFFFD"))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				validUTF8(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			validUTF8(v.Index(i))
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			validUTF8(e)
			v.SetMapIndex(iter.Key(), e)
		}
	}
}

// redactedCopy is a deep copy of c with secrets masked.
func (c *Config) redactedCopy() *Config {
	r := configSecrets().redact(reflect.ValueOf(c).Elem(), notSecret).Interface().(Config)
	return &r
}

// redactURL masks the password of a URL, if it has one.
func redactURL(s string) string {
	if _, ok := urlPassword(s); !ok {
		return s
	}
	u, _ := url.Parse(s)
	user := url.User(u.User.Username()).String()
	u.User = nil
	// Built by hand: url.URL.String would percent-encode the mask.
	prefix := u.Scheme + "://"
	return prefix + user + ":" + Mask + "@" + strings.TrimPrefix(u.String(), prefix)
}

func urlPassword(s string) (string, bool) {
	if !strings.Contains(s, "@") {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return "", false
	}
	pw, ok := u.User.Password()
	return pw, ok && pw != ""
}

// Secrets returns every non-empty secret value (the values Redacted masks),
// without duplicates, longest first so that a scrubber replacing them in
// order never leaves part of a longer one behind.
func (c *Config) Secrets() []string {
	set := map[string]bool{}
	add := func(s string) {
		if s != "" {
			set[s] = true
		}
	}
	configSecrets().each(reflect.ValueOf(c).Elem(), add)
	// fleet.nats_url is a secret as a whole; each URL's password is one
	// too (an error may name it alone), and so is a user without a
	// password (NATS takes a token there); a user name with a password
	// is not (scrubbing "agent" would mangle every log line).
	for _, u := range strings.Split(c.Fleet.NATSURL, ",") {
		if pu, err := url.Parse(strings.TrimSpace(u)); err == nil && pu.User != nil {
			if pw, ok := pu.User.Password(); ok {
				add(pw)
			} else {
				add(pu.User.Username())
			}
		}
	}
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b string) int {
		if n := cmp.Compare(len(b), len(a)); n != 0 {
			return n
		}
		return strings.Compare(a, b)
	})
	return out
}
