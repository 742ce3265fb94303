// Package textkey names a text by 128 bits: the key of a cache of
// something computed from texts (their token counts) that must not keep
// the texts themselves alive. A cache keyed by the text holds every text
// it caches; a Key is 24 bytes, whatever the text's length.
//
// A Key is two 64-bit maphash values of the text, under two seeds drawn
// when the process starts, and its length: two texts share a Key with a
// probability of about 2⁻¹²⁸, and no one can make them collide from
// outside the process (the seeds are random).
package textkey

import (
	"hash/maphash"
	"sync"
)

// Key names a text.
type Key struct {
	a, b uint64
	n    int
}

var seedA, seedB = maphash.MakeSeed(), maphash.MakeSeed()

// Of returns text's Key.
func Of(text string) Key {
	return Key{maphash.String(seedA, text), maphash.String(seedB, text), len(text)}
}

// Counts is a bounded cache of a number per text key (a token count),
// safe for concurrent use. Its memory is allocated whole by NewCounts and
// never grows: the slots hold no pointer, so the cache costs the garbage
// collector nothing to scan and a process's memory does not grow as it
// fills. It is two-way set-associative: a text's key has two slots, and
// a new entry takes the first, moving the entry there to the second (the
// older of the two is forgotten).
type Counts struct {
	slots []countSlot
	locks [64]sync.Mutex // a stripe per set index modulo 64
}

type countSlot struct {
	k  Key
	n  int
	ok bool
}

// NewCounts returns a cache of at least size entries (size rounded up to
// an even number, at least 2).
func NewCounts(size int) *Counts {
	sets := max((size+1)/2, 1)
	return &Counts{slots: make([]countSlot, 2*sets)}
}

func (c *Counts) set(k Key) (int, *sync.Mutex) {
	s := int(k.a % uint64(len(c.slots)/2))
	return 2 * s, &c.locks[s%len(c.locks)]
}

// Get returns the number cached for k.
func (c *Counts) Get(k Key) (int, bool) {
	i, mu := c.set(k)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range c.slots[i : i+2] {
		if s.ok && s.k == k {
			return s.n, true
		}
	}
	return 0, false
}

// Add caches n for k.
func (c *Counts) Add(k Key, n int) {
	i, mu := c.set(k)
	mu.Lock()
	defer mu.Unlock()
	for j := i; j < i+2; j++ {
		if c.slots[j].ok && c.slots[j].k == k {
			c.slots[j].n = n
			return
		}
	}
	c.slots[i+1] = c.slots[i]
	c.slots[i] = countSlot{k: k, n: n, ok: true}
}

// Len returns how many entries the cache holds.
func (c *Counts) Len() int {
	n := 0
	for s := range len(c.slots) / 2 {
		mu := &c.locks[s%len(c.locks)]
		mu.Lock()
		for _, x := range c.slots[2*s : 2*s+2] {
			if x.ok {
				n++
			}
		}
		mu.Unlock()
	}
	return n
}
