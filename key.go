package tidemark

import (
	"cmp"
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
	s := string(k)
	for len(s) > 0 {
		if s[0] == 0 {
			parts = append(parts, KeyPart{Null: true})
			s = s[1:]
			continue
		}
		n, w := binary.Uvarint([]byte(s[1:min(len(s), 11)]))
		if w <= 0 || uint64(len(s)-1-w) < n {
			return parts
		}
		start := 1 + w
		parts = append(parts, KeyPart{Value: s[start : start+int(n)]})
		s = s[start+int(n):]
	}
	return parts
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
// results are printed and stored in.
func (k Key) Compare(other Key) int {
	if k == other {
		return 0
	}
	pa, pb := k.Parts(), other.Parts()
	for i := range min(len(pa), len(pb)) {
		switch {
		case pa[i].Null && pb[i].Null:
		case pa[i].Null:
			return -1
		case pb[i].Null:
			return 1
		default:
			if c := strings.Compare(pa[i].Value, pb[i].Value); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(pa), len(pb))
}
