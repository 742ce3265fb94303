// Package jsonerr describes JSON decoding errors without quoting the
// input, so that an error about a stored message, an export or an
// imported line never carries its text.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Problem describes err, an encoding/json decoding error, by where it is
// (an offset, a field) and never by what the input says there.
func Problem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at offset %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong JSON type %s", typ.Field, typ.Value)
	}
	return "invalid JSON"
}
