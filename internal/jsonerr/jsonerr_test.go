package jsonerr

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProblem(t *testing.T) {
	var v struct{ N int }
	for _, tc := range []struct {
		in, want string
	}{
		{`{"N": "secret"}`, `field "N" has the wrong JSON type string`},
		{`{"N": secret}`, "invalid JSON at offset 7"},
	} {
		got := Problem(json.Unmarshal([]byte(tc.in), &v))
		assert.Equal(t, tc.want, got)
		assert.NotContains(t, got, "secret", "never the input")
	}
	assert.Equal(t, "invalid JSON", Problem(errors.New("other")))
}
