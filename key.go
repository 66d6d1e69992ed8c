package tidemark

import (
	"encoding/binary"
	"strings"
)

// KeyPart is one grouping value. Null marks a row without the field, which
// groups under null as SQL does.
type KeyPart struct {
	Value string
	Null  bool
}

// Key is a tuple of grouping values in one comparable string, so it can be a
// map key without allocation per lookup. Each part is encoded as 0x00 (null)
// or 0x01, a uvarint length and the bytes. The empty Key has no parts (no
// --key flags).
type Key string

// MakeKey encodes parts into a Key.
func MakeKey(parts ...KeyPart) Key {
	return Key(AppendKey(nil, parts...))
}

// AppendKey appends the encoding of parts to dst, for callers that reuse a buffer.
func AppendKey(dst []byte, parts ...KeyPart) []byte {
	for _, p := range parts {
		dst = AppendKeyPart(dst, p.Value, p.Null)
	}
	return dst
}

// AppendKeyPart appends one encoded part to dst.
func AppendKeyPart(dst []byte, value string, null bool) []byte {
	if null {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// Parts decodes the key. A malformed key (never produced by MakeKey) decodes
// as far as it is well formed.
func (k Key) Parts() []KeyPart {
	var parts []KeyPart
	for s := string(k); ; {
		var p KeyPart
		var ok bool
		if p, s, ok = nextPart(s); !ok {
			return parts
		}
		parts = append(parts, p)
	}
}

// nextPart decodes the first part of the encoding s and returns the rest;
// ok is false at the end of s or where s is malformed. It allocates
// nothing: the part's value is a substring of s.
func nextPart(s string) (p KeyPart, rest string, ok bool) {
	if len(s) == 0 {
		return p, s, false
	}
	if s[0] == 0 {
		return KeyPart{Null: true}, s[1:], true
	}
	var n uint64
	var shift uint
	i := 1
	for ; ; i++ {
		if i == len(s) || i > 10 {
			return p, s, false
		}
		c := s[i]
		if i == 10 && c > 1 {
			return p, s, false // overflows 64 bits, as binary.Uvarint rejects
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
		shift += 7
	}
	start := i + 1
	if uint64(len(s)-start) < n {
		return p, s, false
	}
	end := start + int(n)
	return KeyPart{Value: s[start:end]}, s[end:], true
}

// String renders the key for logs and tables: parts joined by "|", null as ∅.
func (k Key) String() string {
	parts := k.Parts()
	out := make([]string, len(parts))
	for i, p := range parts {
		if p.Null {
			out[i] = "∅"
		} else {
			out[i] = p.Value
		}
	}
	return strings.Join(out, "|")
}

// Compare orders keys part by part, null first, then by value: the order
// results are printed and stored in. It decodes in place and allocates
// nothing, so sorting emitted windows costs only comparisons.
func (k Key) Compare(other Key) int {
	if k == other {
		return 0
	}
	a, b := string(k), string(other)
	for {
		// Fast path: two values shorter than 128 bytes (a one-byte length).
		if len(a) >= 2 && len(b) >= 2 && a[0] == 1 && b[0] == 1 && a[1] < 0x80 && b[1] < 0x80 {
			na, nb := 2+int(a[1]), 2+int(b[1])
			if na <= len(a) && nb <= len(b) {
				if c := strings.Compare(a[2:na], b[2:nb]); c != 0 {
					return c
				}
				a, b = a[na:], b[nb:]
				continue
			}
		}
		pa, ra, oka := nextPart(a)
		pb, rb, okb := nextPart(b)
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		case pa.Null && pb.Null:
		case pa.Null:
			return -1
		case pb.Null:
			return 1
		default:
			if c := strings.Compare(pa.Value, pb.Value); c != 0 {
				return c
			}
		}
		a, b = ra, rb
	}
}
