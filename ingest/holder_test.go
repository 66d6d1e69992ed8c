package ingest

import "testing"

// TestHolder names the file at the frontier: among the files that hold,
// one without a valid event first, else the lowest Max, ties to the one
// silent longest; none when no file holds.
func TestHolder(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []FilePosition
		want  string // "" for none
	}{
		{"none holds", []FilePosition{{Path: "a", Max: 1, HasMax: true}}, ""},
		{"lowest max", []FilePosition{{Path: "a", Max: 5, HasMax: true, Hold: true}, {Path: "b", Max: 3, HasMax: true, Hold: true}, {Path: "c", Max: 1, HasMax: true}}, "b"},
		{"no event yet first", []FilePosition{{Path: "a", Max: 5, HasMax: true, Hold: true}, {Path: "b", Hold: true}}, "b"},
		{"tie: silent longest", []FilePosition{{Path: "a", Max: 5, HasMax: true, Hold: true, LastLine: 20}, {Path: "b", Max: 5, HasMax: true, Hold: true, LastLine: 10}}, "b"},
	} {
		p := Position{Files: c.files}
		f, ok := p.Holder()
		got := ""
		if ok {
			got = f.Path
		}
		if got != c.want {
			t.Errorf("%s: holder %q, want %q", c.name, got, c.want)
		}
		if ft, held := p.Frontier(); ok != held || ok && f.HasMax && ft != f.Max {
			t.Errorf("%s: holder %+v disagrees with Frontier %d (held %v)", c.name, f, ft, held)
		}
	}
}
