package redisstore

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// DefaultDecodeCacheSize is the number of decoded messages a Store keeps
// without WithDecodeCache.
const DefaultDecodeCacheSize = 4096

// maxCachedElement is the size of the largest list element the decode
// cache keeps, so the cache holds at most DefaultDecodeCacheSize × 16 KiB
// however large the messages are.
const maxCachedElement = 16 << 10

// decodeCache maps a stored list element — its exact bytes, Seq and role
// flag included — to the record it decodes to. A window memory reads the
// same newest messages on every turn, so without it most of a load's time
// goes to decoding JSON it decoded the turn before. The key is the stored
// value itself, so a hit is always exactly what decoding would give: an
// element changed in Redis is a different key, and nothing needs
// invalidating. Only successful decodes are cached.
type decodeCache struct {
	c *lru.Cache[string, store.Record]
}

func newDecodeCache(size int) *decodeCache {
	if size <= 0 {
		return nil
	}
	c, err := lru.New[string, store.Record](size)
	if err != nil { // only for size <= 0, excluded above
		return nil
	}
	return &decodeCache{c: c}
}

// get returns a copy of the cached record of elem.
func (d *decodeCache) get(elem string) (store.Record, bool) {
	if d == nil || len(elem) > maxCachedElement {
		return store.Record{}, false
	}
	r, ok := d.c.Get(elem)
	if !ok {
		return store.Record{}, false
	}
	r.Message = storekit.CloneMessage(r.Message)
	return r, true
}

// put remembers a copy of r as the decoding of elem.
func (d *decodeCache) put(elem string, r store.Record) {
	if d == nil || len(elem) > maxCachedElement {
		return
	}
	d.c.Add(elem, store.Record{Seq: r.Seq, Message: storekit.CloneMessage(r.Message), Time: r.Time})
}
