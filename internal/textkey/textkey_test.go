package textkey_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/textkey"
)

func TestKeysNameTexts(t *testing.T) {
	seen := map[textkey.Key]string{}
	for i := range 100000 {
		s := fmt.Sprint("text ", i)
		if j := i % 7; j == 0 {
			s = s[:len(s)-1] // prefixes of other texts
		}
		k := textkey.Of(s)
		if other, ok := seen[k]; ok {
			require.Equal(t, other, s, "two texts share a key")
		}
		seen[k] = s
		require.Equal(t, k, textkey.Of(string([]byte(s))), "the same text, another string")
	}
	assert.NotEqual(t, textkey.Of(""), textkey.Of("\x00"))
}

// A Counts cache returns what was added, forgets only when its sets are
// full (each key has two slots), holds at most its size, and is safe for
// concurrent use (run with -race).
func TestCountsCache(t *testing.T) {
	c := textkey.NewCounts(1000)
	for i := range 300 {
		c.Add(textkey.Of(fmt.Sprint(i)), i)
	}
	found := 0
	for i := range 300 {
		if n, ok := c.Get(textkey.Of(fmt.Sprint(i))); ok {
			require.Equal(t, i, n)
			found++
		}
	}
	assert.Greater(t, found, 270, "a cache of 1,000 kept most of 300 keys")
	c.Add(textkey.Of("0"), 42)
	if n, ok := c.Get(textkey.Of("0")); ok {
		assert.Equal(t, 42, n, "an Add replaces the key's count")
	}
	_, ok := c.Get(textkey.Of("never added"))
	assert.False(t, ok)
	for i := range 10000 {
		c.Add(textkey.Of(fmt.Sprint("more ", i)), i)
	}
	assert.LessOrEqual(t, c.Len(), 1000)
	assert.Greater(t, c.Len(), 900, "a full cache uses its slots")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := textkey.Of(fmt.Sprint(g, "/", i%50))
				c.Add(k, i%50)
				if n, ok := c.Get(k); ok {
					assert.Equal(t, i%50, n)
				}
			}
		})
	}
	wg.Wait()
}
