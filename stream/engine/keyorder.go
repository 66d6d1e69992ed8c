package engine

import "tidemark"

// appendOrderedKey encodes key so that bytewise order is Key.Compare's:
// per part 0x00 (null) or 0x01, the value with 0x00 escaped as 0x00 0xff,
// and 0x00 0x01 as terminator; bytes after the last well-formed part (keys
// MakeKey never makes) as 0x02 and the same escaping.
func appendOrderedKey(dst []byte, key tidemark.Key) []byte {
	parts := key.Parts()
	wellFormed := 0
	for _, p := range parts {
		if p.Null {
			dst = append(dst, 0)
			wellFormed++
			continue
		}
		dst = appendEscaped(append(dst, 1), p.Value)
		wellFormed += 1 + uvarintLen(uint64(len(p.Value))) + len(p.Value)
	}
	if wellFormed < len(key) {
		dst = appendEscaped(append(dst, 2), string(key[wellFormed:]))
	}
	return dst
}

// AppendOrderedKey appends key encoded so that bytewise order is
// Key.Compare's (appendOrderedKey), for any key: one whose parts
// do not re-encode to its own prefix (a non-minimal length, never made by
// MakeKey) is stored whole as one malformed tail, which decodes back.
func AppendOrderedKey(dst []byte, key tidemark.Key) []byte {
	parts := key.Parts()
	enc := tidemark.AppendKey(nil, parts...)
	if len(enc) > len(key) || string(enc) != string(key[:len(enc)]) {
		return appendEscaped(append(dst, 2), string(key))
	}
	return appendOrderedKey(dst, key)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func appendEscaped(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if v[i] == 0 {
			dst = append(dst, 0, 0xff)
		} else {
			dst = append(dst, v[i])
		}
	}
	return append(dst, 0, 1)
}
