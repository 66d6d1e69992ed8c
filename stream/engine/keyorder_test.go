package engine

import (
	"encoding/binary"
	"strings"
	"testing"

	"tidemark"
)

// TestOrderedPrefix: the sort prefix of a key is the first eight bytes of
// its database encoding, for well-formed, long-length and malformed keys.
func TestOrderedPrefix(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, k := range []tidemark.Key{"", "k", "\x01\x85", tidemark.MakeKey(tidemark.KeyPart{Null: true}),
		tidemark.MakeKey(tidemark.KeyPart{Value: "a\x00b"}, tidemark.KeyPart{Null: true}, tidemark.KeyPart{Value: "c"}),
		tidemark.MakeKey(tidemark.KeyPart{Value: long}), tidemark.MakeKey(tidemark.KeyPart{Value: "ab"}, tidemark.KeyPart{Value: long}),
		tidemark.MakeKey(tidemark.KeyPart{Value: "user-000123456"})} {
		var want [8]byte
		copy(want[:], AppendOrderedKey(nil, k))
		if got := orderedPrefix(k, nil); got != binary.BigEndian.Uint64(want[:]) {
			t.Errorf("%q: prefix %x, want %x", k, got, want)
		}
	}
}
