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
	// Walk both encodings part by part, without decoding them into slices:
	// sorting the windows a watermark jump closes compares keys millions
	// of times.
	a, b := string(k), string(other)
	for {
		va, na, ra, oka := nextPart(a)
		vb, nb, rb, okb := nextPart(b)
		switch {
		case !oka || !okb:
			return cmp.Compare(btoi(oka), btoi(okb))
		case na && nb:
		case na:
			return -1
		case nb:
			return 1
		default:
			if c := strings.Compare(va, vb); c != 0 {
				return c
			}
		}
		a, b = ra, rb
	}
}

// nextPart decodes the first part of an encoded key as Parts does; ok is
// false at the end or where the encoding is malformed.
func nextPart(s string) (value string, null bool, rest string, ok bool) {
	if len(s) == 0 {
		return "", false, "", false
	}
	if s[0] == 0 {
		return "", true, s[1:], true
	}
	var n uint64
	w := 0
	for i := 1; i < min(len(s), 11); i++ { // binary.Uvarint on a string, without the copy
		c := s[i]
		if c < 0x80 {
			if i == 10 && c > 1 {
				return "", false, "", false
			}
			n |= uint64(c) << (7 * (i - 1))
			w = i
			break
		}
		n |= uint64(c&0x7f) << (7 * (i - 1))
	}
	if w == 0 || uint64(len(s)-1-w) < n {
		return "", false, "", false
	}
	start := 1 + w
	return s[start : start+int(n)], false, s[start+int(n):], true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
