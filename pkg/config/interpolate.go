package config

import (
	"errors"
	"fmt"
	"strings"

	"agent/pkg/clip"
)

// interpolate replaces every "${NAME}" in s with lookup(NAME). "$${" is a
// literal "${"; any other "$" is kept. It returns the names of variables that
// were unset (they expand to ""), in order of appearance, and an error for an
// unclosed "${" or an invalid name. The error never quotes the value itself,
// which may hold a secret.
func interpolate(s string, lookup Env) (string, []string, error) {
	if !strings.Contains(s, "$") {
		return s, nil, nil
	}
	var (
		b     strings.Builder
		unset []string
	)
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", nil, errors.New(`"${" without a closing "}" (write "$${" for a literal "${")`)
			}
			name := rest[2:end]
			if !validVarName(name) {
				if name == "" {
					return "", nil, errors.New(`empty variable name "${}" (write "$${" for a literal "${")`)
				}
				return "", nil, fmt.Errorf("invalid variable name %q in \"${...}\" (want letters, digits and _, not starting with a digit)", clip.String(name, 40))
			}
			v, ok := lookupEnv(lookup, name)
			if !ok {
				unset = append(unset, name)
			}
			b.WriteString(v)
			i += end + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), unset, nil
}

// soleReference reports whether s is exactly one "${NAME}" and returns NAME.
func soleReference(s string) (string, bool) {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") {
		return "", false
	}
	name := s[2 : len(s)-1]
	if !validVarName(name) {
		return "", false
	}
	return name, true
}

// validVarName reports whether name is [A-Za-z_][A-Za-z0-9_]*.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func lookupEnv(env Env, key string) (string, bool) {
	if env == nil {
		return "", false
	}
	return env(key)
}
