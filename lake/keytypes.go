package lake

import (
	"fmt"
	"strconv"

	"tidemark"
)

// KeyType is a key column's type. A lake fixes its key types when it is
// made (the stream infers them from its first batch) and remembers them in
// its tables' configuration (confKeyTypes); a lake that records none keeps
// every key as text.
type KeyType string

// Key column types, named as Delta names them.
const (
	KeyString KeyType = "string"
	KeyLong   KeyType = "long"    // BIGINT
	KeyDouble KeyType = "double"  // DOUBLE
	KeyBool   KeyType = "boolean" // BOOLEAN
)

func (t KeyType) kind() kind {
	switch t {
	case KeyLong:
		return kindLong
	case KeyDouble:
		return kindDouble
	case KeyBool:
		return kindBool
	}
	return kindString
}

func (t KeyType) valid() bool {
	switch t {
	case KeyString, KeyLong, KeyDouble, KeyBool:
		return true
	}
	return false
}

// KeyType returns key i's column type (KeyString past KeyTypes).
func (c Config) KeyType(i int) KeyType {
	if i < len(c.KeyTypes) && c.KeyTypes[i] != "" {
		return c.KeyTypes[i]
	}
	return KeyString
}

// typed reports whether any key is not text.
func (c Config) typed() bool {
	for i := range c.Keys {
		if c.KeyType(i) != KeyString {
			return true
		}
	}
	return false
}

// InferKeyType returns the column type for a key whose non-null parts in a
// first batch have these kinds: all integral numbers BIGINT, numbers with
// any fraction DOUBLE, all booleans BOOLEAN, anything else (or nothing) text.
func InferKeyType(kinds []tidemark.KeyKind) KeyType {
	if len(kinds) == 0 {
		return KeyString
	}
	t := KeyLong
	for _, k := range kinds {
		switch {
		case k == tidemark.KeyInt && (t == KeyLong || t == KeyDouble):
		case k == tidemark.KeyFloat && (t == KeyLong || t == KeyDouble):
			t = KeyDouble
		case k == tidemark.KeyBool && kinds[0] == tidemark.KeyBool:
			t = KeyBool
		default:
			return KeyString
		}
	}
	return t
}

// KeyFits reports whether a key part of kind k (null parts always fit)
// can be stored in a column of type t without loss.
func KeyFits(t KeyType, k tidemark.KeyKind) bool {
	switch t {
	case KeyLong:
		return k == tidemark.KeyInt
	case KeyDouble:
		return k == tidemark.KeyInt || k == tidemark.KeyFloat
	case KeyBool:
		return k == tidemark.KeyBool
	}
	return true
}

// CheckKey returns "" when r's key fits the lake's key types, else why not
// (for a bad_key quarantine row).
func (c Config) CheckKey(r *tidemark.Record) string {
	if !c.typed() {
		return ""
	}
	var msg string
	forEachKeyPart(r.Key, len(c.Keys), func(i int, v string, null bool) {
		if msg != "" || null {
			return
		}
		if t := c.KeyType(i); !KeyFits(t, r.KeyKindOf(i)) {
			msg = fmt.Sprintf("key %q is %s, but the lake's column %s is %s", c.Keys[i], strconv.Quote(v), c.KeyNames()[i], t.sql())
		}
	})
	return msg
}

func (t KeyType) sql() string {
	switch t {
	case KeyLong:
		return "BIGINT"
	case KeyDouble:
		return "DOUBLE"
	case KeyBool:
		return "BOOLEAN"
	}
	return "STRING"
}

// FormatKeyJSON renders a key part as a JSON value: numbers and booleans
// of a typed column bare, anything else a JSON string.
func FormatKeyJSON(t KeyType, v string) string {
	if t != KeyString {
		return v
	}
	return strconv.Quote(v)
}

// setKeyText sets column c of w, of kind k, from a key part's canonical
// text; text that does not parse (CheckKey keeps it out) is null.
func (w *fileWriter) setKeyText(c int, v string) {
	switch w.t.cols[c].kind {
	case kindLong:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			w.long(c, n)
			return
		}
	case kindDouble:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			w.double(c, f)
			return
		}
	case kindBool:
		if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
			w.boolean(c, b)
			return
		}
	default:
		w.str(c, v)
		return
	}
	w.null(c)
}

// appendKeyCol appends row r of key column c (of kind k) to kb as a key
// part, numbers and booleans as their canonical text: the one way every
// reader turns a key column back into a tidemark.Key.
func appendKeyCol(kb []byte, c *colData, k kind, r int) []byte {
	if c.isNull(r) {
		return appendKeyPartBytes(kb, nil, true)
	}
	switch k {
	case kindLong:
		var buf [20]byte
		return appendKeyPartBytes(kb, strconv.AppendInt(buf[:0], c.ints[r], 10), false)
	case kindDouble:
		var buf [32]byte
		return appendKeyPartBytes(kb, strconv.AppendFloat(buf[:0], c.floats[r], 'g', -1, 64), false)
	case kindBool:
		var buf [5]byte
		return appendKeyPartBytes(kb, strconv.AppendBool(buf[:0], c.bools[r]), false)
	}
	return appendKeyPartBytes(kb, c.bytes[r], false)
}

// appendKeyText appends a key part's canonical text to b, a buffer of a
// typed column of kind k, and reports whether it parsed.
func (b *colBuf) appendKeyText(k kind, v string) bool {
	switch k {
	case kindLong:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		b.ints = append(b.ints, n)
	case kindDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false
		}
		b.floats = append(b.floats, f)
	case kindBool:
		if v != "true" && v != "false" {
			return false
		}
		b.bools = append(b.bools, v == "true")
	default:
		return false
	}
	return true
}

// appendZero appends a null's placeholder value for a column of kind k.
func (b *colBuf) appendZero(k kind) {
	switch k {
	case kindTimestamp, kindLong:
		b.ints = append(b.ints, 0)
	case kindDouble:
		b.floats = append(b.floats, 0)
	case kindBool:
		b.bools = append(b.bools, false)
	default:
		b.bytes = append(b.bytes, nil)
	}
}
