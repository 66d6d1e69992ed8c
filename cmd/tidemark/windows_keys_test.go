package main

import (
	"testing"

	"tidemark"
	"tidemark/lake"
)

// Keys of a BIGINT, DOUBLE or BOOLEAN column are JSON numbers/booleans in
// `tidemark windows` (and recompute) output; text keys stay strings, even
// when they look like numbers.
func TestWindowCellsTypedKeys(t *testing.T) {
	cfg := lake.Config{Keys: []string{"status", "ratio", "ok", "path"}, KeyTypes: []lake.KeyType{lake.KeyLong, lake.KeyDouble, lake.KeyBool, lake.KeyString}}
	p := func(v string) tidemark.KeyPart { return tidemark.KeyPart{Value: v} }
	row := lake.WindowRow{Result: tidemark.Result{Key: tidemark.MakeKey(p("500"), p("0.25"), p("true"), p("404"))}}
	cells := windowCells(row, cfg)[2:6]
	want := []cell{numCell("500"), numCell("0.25"), numCell("true"), strCell("404")}
	for i, c := range cells {
		if c != want[i] {
			t.Errorf("key %s: cell %+v, want %+v", cfg.Keys[i], c, want[i])
		}
	}
}
