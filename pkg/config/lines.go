package config

import (
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// maxLineLookups bounds how many keys get a line number, so that a huge file
// with thousands of bad keys costs linear, not quadratic, time. Findings past
// the limit carry line 0.
const maxLineLookups = 64

// lineFinder finds the line on which a key is defined.
//
// BurntSushi/toml records every key's position but only reveals it in the
// ParseError of a failed decode. To learn where key a.b.c is, lineFinder
// decodes the document into a throwaway struct with exactly that path whose
// leaf always fails to unmarshal, and reads Position.Line from the error. It
// costs one parse per lookup, so it is done only for keys that have a
// finding, at most maxLineLookups times, and cached.
type lineFinder struct {
	text    string
	cache   map[string]int
	lookups int
}

func newLineFinder(text string) *lineFinder {
	return &lineFinder{text: text, cache: make(map[string]int)}
}

// line returns the line of path, else of its nearest ancestor that has one,
// else 0.
func (lf *lineFinder) line(path []string) int {
	for n := len(path); n > 0; n-- {
		if l := lf.exact(path[:n]); l > 0 {
			return l
		}
	}
	return 0
}

func (lf *lineFinder) exact(path []string) int {
	k := strings.Join(path, "\x00")
	if l, ok := lf.cache[k]; ok {
		return l
	}
	if lf.lookups >= maxLineLookups {
		return 0
	}
	lf.lookups++
	l := probeLine(lf.text, path)
	lf.cache[k] = l
	return l
}

// errProbe is what the probe's leaf returns so that the decoder reports the
// leaf's position.
var errProbe = errors.New("probe")

type probe struct{}

func (probe) UnmarshalTOML(any) error { return errProbe }

// probeLine decodes text into a struct shaped like path and returns the line
// the decoder reports for its leaf, or 0.
func probeLine(text string, path []string) (line int) {
	typ := reflect.TypeFor[probe]()
	for i := len(path) - 1; i >= 0; i-- {
		name := path[i]
		// The field's name goes in a struct tag, where the decoder splits
		// options at commas and treats "" and "-" specially.
		if name == "" || name == "-" || strings.Contains(name, ",") {
			return 0
		}
		typ = reflect.StructOf([]reflect.StructField{{
			Name: "F",
			Type: typ,
			Tag:  reflect.StructTag("toml:" + strconv.Quote(name)),
		}})
	}
	defer func() {
		if recover() != nil {
			line = 0
		}
	}()
	_, err := toml.Decode(text, reflect.New(typ).Interface())
	// ParseError does not wrap the cause; its Message is the cause's text.
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Message == errProbe.Error() {
		return pe.Position.Line
	}
	return 0
}
