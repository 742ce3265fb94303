package adk

import (
	"fmt"
	"reflect"
	"unicode/utf8"
)

// checkUTF8 returns an error naming the first string in v (its fields,
// map keys and values, elements, followed pointers and interfaces) that is
// not valid UTF-8: JSON, and so every store of memstack, would replace its
// bad bytes with U+FFFD without a word, and a value accepted must read
// back as it was given.
func checkUTF8(v any) error {
	return walkUTF8(reflect.ValueOf(v), "", 0)
}

func walkUTF8(v reflect.Value, path string, depth int) error {
	if depth > 64 || !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			if path == "" {
				path = "a string"
			}
			return fmt.Errorf("%s is not valid UTF-8", path)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return walkUTF8(v.Elem(), path, depth+1)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if err := walkUTF8(v.Field(i), join(path, f.Name), depth+1); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes travel as base64
		}
		for i := range v.Len() {
			if err := walkUTF8(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := walkUTF8(iter.Key(), path+" key", depth+1); err != nil {
				return err
			}
			if err := walkUTF8(iter.Value(), fmt.Sprintf("%s[%v]", path, printable(iter.Key())), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// printable is a map key for a path: its value when it is a valid string,
// else its kind.
func printable(k reflect.Value) string {
	if k.Kind() == reflect.String && utf8.ValidString(k.String()) && len(k.String()) <= 40 {
		return fmt.Sprintf("%q", k.String())
	}
	return k.Kind().String()
}
