package redisstore

import (
	"strconv"
	"sync"
)

// numSlots is the number of Redis Cluster hash slots.
const numSlots = 16384

// crc16Table drives CRC-16/XMODEM (polynomial 0x1021, initial value 0),
// the checksum Redis Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// hashSlot returns the Redis Cluster hash slot of a hash tag (the text
// between the braces of a key).
func hashSlot[T string | []byte](tag T) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^tag[i]]
	}
	return int(crc) % numSlots
}

// slotTags maps every hash slot to the number n of its tag "f<n>": the
// first of f0, f1, f2, … that hashes to the slot. It is part of the
// storage format (the forgotten key's name), so it never changes.
var slotTags struct {
	once sync.Once
	n    [numSlots]uint32
}

// slotTag returns the tag of the forgotten key of slot: the first of "f0",
// "f1", "f2", … whose hash slot it is. Tags have no ':', so none is an
// identity key (memstack.Identity.Key always has two).
func slotTag(slot int) string {
	slotTags.once.Do(func() {
		var found [numSlots]bool
		left := numSlots
		buf := make([]byte, 0, 16)
		// About 170,000 candidates cover every slot (a coupon collector's
		// 16384·H(16384)); it takes a few milliseconds, once.
		for n := uint32(0); left > 0; n++ {
			buf = strconv.AppendUint(append(buf[:0], 'f'), uint64(n), 10)
			s := hashSlot(buf)
			if !found[s] {
				found[s] = true
				slotTags.n[s] = n
				left--
			}
		}
	})
	return "f" + strconv.FormatUint(uint64(slotTags.n[slot]), 10)
}
