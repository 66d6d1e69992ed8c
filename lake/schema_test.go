package lake

import (
	"context"
	"slices"
	"strings"
	"testing"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

func TestCheckKeys(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string // "" for accepted
	}{
		{nil, ""},
		{[]string{"page", "country", "user_id", "Région"}, ""},
		{[]string{""}, "must not be empty"},
		{[]string{"count"}, `--key "count" is a column name of the lake's tables`},
		{[]string{"Status"}, `--key "Status" is a column name of the lake's tables ("status"`},
		{[]string{"EVENT_DATE"}, `("event_date"`},
		{[]string{"Old_Count"}, `("old_count"`},     // reconcile_log
		{[]string{"late_rows"}, `("late_rows"`},     // reconcile_log
		{[]string{"reason"}, `("reason"`},           // quarantine
		{[]string{"ingest_date"}, `("ingest_date"`}, // quarantine partition
		{[]string{"page", "page"}, `--key "page" given twice`},
		{[]string{"page", "Page"}, `--key "page" and --key "Page" are one column`},
		{[]string{"a b"}, `--key "a b": a Delta column name cannot hold`},
		{[]string{"x,y"}, "cannot hold"},
		{[]string{"p=q"}, "cannot hold"},
		{[]string{"f(x)"}, "cannot hold"},
		{[]string{"a;b"}, "cannot hold"},
		{[]string{"{a}"}, "cannot hold"},
		{[]string{"tab\there"}, `--key "tab\there"`},
		{[]string{"line\nbreak"}, `--key "line\nbreak"`},
	} {
		err := CheckKeys(tc.keys)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: got %v, want accepted", tc.keys, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want an error with %q", tc.keys, err, tc.want)
		case err != nil && strings.ContainsAny(err.Error(), "\n\r"):
			t.Errorf("%q: error is not one line: %q", tc.keys, err)
		}
	}
}

// FuzzCheckKeys: whatever keys CheckKeys accepts give tables whose column
// names Spark accepts (unique ignoring case, none of the forbidden
// characters); whatever it refuses, it refuses in one line.
func FuzzCheckKeys(f *testing.F) {
	f.Add("page", "country")
	f.Add("Status", "x")
	f.Add("a b", "Page")
	f.Add("page", "PAGE")
	f.Add("", "window_start")
	f.Fuzz(func(t *testing.T, a, b string) {
		keys := []string{a, b}
		if err := CheckKeys(keys); err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: error is not one line: %q", keys, err)
			}
			return
		}
		for _, tb := range []*table{rawEventsTable(keys, true), windowResultsTable(keys), reconcileLogTable(keys, true)} {
			seen := map[string]bool{}
			for _, name := range append(colNames(tb), tb.partCols...) {
				if name == "" || strings.ContainsAny(name, badNameChars) {
					t.Fatalf("%q accepted, but table %s gets column %q", keys, tb.name, name)
				}
				if l := strings.ToLower(name); seen[l] {
					t.Fatalf("%q accepted, but table %s has two columns named %q ignoring case", keys, tb.name, l)
				}
				seen[strings.ToLower(name)] = true
			}
		}
	})
}

func colNames(t *table) []string {
	var out []string
	for _, c := range t.cols {
		out = append(out, c.name)
	}
	return out
}

// Open refuses keys CheckKeys refuses, but a lake that already holds such
// a key (created before the check) still opens when its setup is adopted.
func TestOpenChecksKeys(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	cfg.Keys = []string{"page", "Status"}
	if _, err := Open(ctx, st, cfg); err == nil || !strings.Contains(err.Error(), `--key "Status" is a column name`) {
		t.Fatalf("open with --key Status: got %v", err)
	}
	// An old lake with that key: tables made without the check.
	old := &Lake{st: st, cfg: cfg, clock: clock.Now, tables: map[string]*handle{}}
	old.cfg.Window.Slide = old.cfg.Window.Size
	defs := map[string]*table{TableRawEvents: rawEventsTable(cfg.Keys, true), TableQuarantine: quarantineTable(),
		TableWindowResults: windowResultsTable(cfg.Keys), TableReconcileLog: reconcileLogTable(cfg.Keys, false)}
	for _, name := range tableNames {
		if defs[name] == nil {
			continue // window_partials came later; Open creates it
		}
		h := &handle{def: defs[name], dt: delta.Open(st, name, delta.Options{Clock: clock.Now})}
		if err := old.create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(ctx, st, Config{Clock: clock.Now})
	if err != nil {
		t.Fatalf("adopting an old lake with --key Status: %v", err)
	}
	if got := l.Config().Keys; !slices.Equal(got, cfg.Keys) {
		t.Errorf("adopted keys %q, want %q", got, cfg.Keys)
	}
}
