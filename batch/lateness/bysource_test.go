package lateness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"tidemark"
	"tidemark/lake"
	"tidemark/lake/store"
)

// In a lake where a key is named source, tidemark stores its own source
// column as _tm_source: By "source" groups by the key (the column named
// source, as SQL over the table would), and tidemark's sources are grouped
// by the name the lake's column list gives them. In a lake without such a
// key, "source" is tidemark's column, as always.
func TestByWhenAKeyIsNamedSource(t *testing.T) {
	ctx := context.Background()
	for _, keyed := range []bool{true, false} {
		st, err := store.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"page"}
		if keyed {
			keys = []string{"source"}
		}
		lk, err := lake.Open(ctx, st, lake.Config{Keys: keys, Window: tidemark.WindowSpec{Size: testWindow}})
		if err != nil {
			t.Fatal(err)
		}
		own := lk.Config().Column(lake.ColSource)
		if want := map[bool]string{true: "_tm_source", false: "source"}[keyed]; own != want {
			t.Fatalf("keyed %v: tidemark's source column is %q, want %q", keyed, own, want)
		}
		var recs []tidemark.Record
		for i := range 60 {
			src := fmt.Sprintf("src%d", i%2)
			recs = append(recs, tidemark.Record{
				Source: src, File: src + ".ndjson", Offset: int64(i * 100), Payload: []byte("{}"),
				EventTime: t0 + int64(i)*1e6, Arrival: t0 + int64(i)*1e6 + 5e5,
				Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("app%d", i%3)}),
			})
		}
		if err := lk.AppendBatch(ctx, lake.Batch{AppID: "test", BatchID: 1, Records: recs}); err != nil {
			t.Fatal(err)
		}
		groups := func(by string) (string, error) { return groupsBy(ctx, lk, by) }
		tests := []struct{ by, want string }{
			{own, "src0=30 src1=30"},             // tidemark's sources, by the lake's name for them
			{keys[0], "app0=20 app1=20 app2=20"}, // the key
		}
		for _, tc := range tests {
			got, err := groups(tc.by)
			if err != nil || got != tc.want {
				t.Errorf("keyed %v, --by %s: got %q (%v), want %q", keyed, tc.by, got, err, tc.want)
			}
		}
		if keyed {
			// Here "source" is the key: the same groups as By the key.
			if got, err := groups(BySource); err != nil || got != "app0=20 app1=20 app2=20" {
				t.Errorf("--by source in a lake keyed by source: got %q (%v), want the key's groups", got, err)
			}
		} else {
			if _, err := groups("_tm_source"); err == nil || !strings.Contains(err.Error(), "want none, source or a key field") {
				t.Errorf("--by _tm_source without a key named source: got %v, want an error naming source", err)
			}
		}
	}
	// A name that is neither: the error names the lake's columns.
	st, _ := store.OpenDir(t.TempDir())
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"source"}, Window: tidemark.WindowSpec{Size: testWindow}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, lk, Config{By: "host", Replay: testReplayer})
	if err == nil || !strings.Contains(err.Error(), "want none, _tm_source or a key field of the lake (source)") {
		t.Errorf("--by host: got %v, want an error naming _tm_source", err)
	}
}

// A key named none or hour is grouped by with ByKeyPrefix: "key:none"
// groups by that key, while the bare "none" stays one group; a key:NAME
// the lake does not have is an error naming its keys.
func TestByKeyPrefixForKeysNamedLikeModes(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(ctx, st, lake.Config{Keys: []string{"none", "hour"}, Window: tidemark.WindowSpec{Size: testWindow}})
	if err != nil {
		t.Fatal(err)
	}
	var recs []tidemark.Record
	for i := range 60 {
		recs = append(recs, tidemark.Record{
			Source: "s", File: "s.ndjson", Offset: int64(i * 100), Payload: []byte("{}"),
			EventTime: t0 + int64(i)*1e6, Arrival: t0 + int64(i)*1e6 + 5e5,
			Key: tidemark.MakeKey(tidemark.KeyPart{Value: fmt.Sprintf("n%d", i%2)}, tidemark.KeyPart{Value: fmt.Sprintf("h%d", i%3)}),
		})
	}
	if err := lk.AppendBatch(ctx, lake.Batch{AppID: "test", BatchID: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	groups := func(by string) (string, error) { return groupsBy(ctx, lk, by) }
	for _, tc := range []struct{ by, want string }{
		{ByNone, "all=60"},
		{"key:none", "n0=30 n1=30"},
		{"key:hour", "h0=20 h1=20 h2=20"},
	} {
		if got, err := groups(tc.by); err != nil || got != tc.want {
			t.Errorf("--by %s: got %q (%v), want %q", tc.by, got, err, tc.want)
		}
	}
	if _, err := groups("key:page"); err == nil || !strings.Contains(err.Error(), "no key field page (its keys: none, hour)") {
		t.Errorf("--by key:page: got %v, want an error naming the lake's keys", err)
	}
}

// groupsBy runs the report grouped by by and lists its groups as
// "name=rows", sorted.
func groupsBy(ctx context.Context, lk *lake.Lake, by string) (string, error) {
	rep, err := Run(ctx, lk, Config{By: by, Replay: testReplayer})
	if err != nil {
		return "", err
	}
	var g []string
	for _, gr := range rep.Groups {
		g = append(g, fmt.Sprintf("%s=%d", gr.Group, gr.Rows))
	}
	slices.Sort(g)
	return strings.Join(g, " "), nil
}
