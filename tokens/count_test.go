package tokens_test

import (
	"errors"
	"io"
	"math"
	"testing"

	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// negative is a counter type whose name the errors must show.
type negative struct{}

func (negative) CountTokens(string) int { return -1 }

type panicking struct{ v any }

func (p panicking) CountTokens(string) int { panic(p.v) }

func TestCount(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		words := tokens.CounterFunc(func(s string) int { return len(s) })
		n, err := tokens.Count(words, "hello")
		require.NoError(t, err)
		assert.Equal(t, 5, n)
		n, err = tokens.Count(tokens.CounterFunc(func(string) int { return math.MaxInt }), "x")
		require.NoError(t, err, "a very large count is valid")
		assert.Equal(t, math.MaxInt, n)
	})
	t.Run("negative", func(t *testing.T) {
		n, err := tokens.Count(negative{}, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount)
		assert.Zero(t, n)
		assert.Contains(t, err.Error(), "tokens_test.negative")
		assert.Contains(t, err.Error(), "returned -1")
	})
	t.Run("panic", func(t *testing.T) {
		n, err := tokens.Count(panicking{"tokenizer exploded"}, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount)
		assert.Zero(t, n)
		assert.Contains(t, err.Error(), "tokens_test.panicking")
		assert.Contains(t, err.Error(), "panicked")
		assert.Contains(t, err.Error(), "tokenizer exploded")
	})
	t.Run("panic with an error", func(t *testing.T) {
		_, err := tokens.Count(panicking{io.ErrUnexpectedEOF}, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the panic's error is wrapped")
	})
	t.Run("panic(nil)", func(t *testing.T) {
		_, err := tokens.Count(panicking{nil}, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount)
	})
	t.Run("nil counter", func(t *testing.T) {
		_, err := tokens.Count(nil, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount)
		var nilFunc tokens.CounterFunc
		_, err = tokens.Count(nilFunc, "hello")
		require.ErrorIs(t, err, tokens.ErrBadCount, "a nil CounterFunc panics: an error")
		assert.Contains(t, err.Error(), "tokens.CounterFunc")
	})
	t.Run("cl100k", func(t *testing.T) {
		c, err := tokens.CL100K()
		require.NoError(t, err)
		n, err := tokens.Count(c, "hello world")
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.False(t, errors.Is(err, tokens.ErrBadCount))
	})
}
