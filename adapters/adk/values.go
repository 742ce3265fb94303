package adk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth is how deeply a value checkValue accepts may nest.
const maxDepth = 200

// maxExactInt is the largest integer a JSON number read back as float64
// (what encoding/json gives an any) holds exactly: 2^53.
const maxExactInt = 1 << 53

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkValue returns an error naming the first part of v that would not
// read back as it was given once stored as JSON (every store of memstack
// keeps events and state as JSON): a string that is not valid UTF-8 (JSON
// would replace its bad bytes with U+FFFD without a word), a
// json.RawMessage that is not UTF-8, or a value nested more than maxDepth
// deep. Numbers are checkNumbers' part, on the JSON itself, whatever type
// wrote them. It walks what encoding/json marshals: exported fields (also those
// promoted from embedded structs), map keys and values, elements, and
// what pointers and interfaces hold; a map, slice or pointer met twice
// (shared, or a cycle, which json.Marshal refuses itself) is walked once.
func checkValue(v any) error {
	w := walker{seen: map[visit]bool{}}
	return w.walk(reflect.ValueOf(v), "", 0)
}

type visit struct {
	ptr uintptr
	typ reflect.Type
}

type walker struct{ seen map[visit]bool }

func (w walker) walk(v reflect.Value, path string, depth int) error {
	if !v.IsValid() {
		return nil
	}
	if depth > maxDepth {
		return fmt.Errorf("%s nests more than %d levels deep", orValue(path), maxDepth)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return nil
		}
		k := visit{v.Pointer(), v.Type()}
		if w.seen[k] {
			return nil
		}
		w.seen[k] = true
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return fmt.Errorf("%s is not valid UTF-8", orValue(path))
		}
	case reflect.Pointer, reflect.Interface:
		return w.walk(v.Elem(), path, depth+1)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			if err := w.walk(v.Field(i), join(path, f.Name), depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Type() == rawMessageType && !utf8.Valid(v.Bytes()) {
				return fmt.Errorf("%s is raw JSON that is not valid UTF-8", orValue(path))
			}
			return nil // other bytes travel as base64
		}
		for i := range v.Len() {
			if err := w.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := w.walk(iter.Key(), path+" key", depth+1); err != nil {
				return err
			}
			if err := w.walk(iter.Value(), fmt.Sprintf("%s[%s]", path, printable(iter.Key())), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func orValue(path string) string {
	if path == "" {
		return "a value"
	}
	return path
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// printable is a map key for a path: the key when it looks like a name (a
// state key, an argument: at most 40 letters, digits and ._:-), else
// "a key", so that an error never quotes what may be a user's words.
func printable(k reflect.Value) string {
	if k.Kind() == reflect.String && nameLike(k.String()) {
		return fmt.Sprintf("%q", k.String())
	}
	return "a key"
}

func nameLike(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == ':' || r == '-') {
			return false
		}
	}
	return true
}

// checkNumbers returns an error for an integer beyond ±2^53 in the JSON
// data (what json.Number, math/big and raw JSON carry past checkValue):
// read back as float64, it would come back rounded.
func checkNumbers(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("it does not read back from JSON: %w", err)
	}
	return numbersIn(v, "", 0)
}

func numbersIn(v any, path string, depth int) error {
	if depth > maxDepth {
		return nil // checkValue refuses such depth
	}
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			return nil // a float: read back as the float it is
		}
		if n, err := strconv.ParseInt(s, 10, 64); err != nil || n > maxExactInt || n < -maxExactInt {
			return fmt.Errorf("%s is an integer beyond ±2^53, which JSON does not read back exactly (pass it as a string)", orValue(path))
		}
	case map[string]any:
		for k, x := range v {
			if err := numbersIn(x, fmt.Sprintf("%s[%s]", path, printable(reflect.ValueOf(k))), depth+1); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if err := numbersIn(x, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
