package lake

import (
	"tidemark"

	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestCheckKeys(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string // "" for accepted
	}{
		{nil, ""},
		{[]string{"page", "country", "user_id", "Région"}, ""},
		{[]string{""}, `--key field "": empty field path`},
		// Own names are keys like any other (see TestOwnNamesAsKeys).
		{[]string{"count"}, ""},
		{[]string{"Status", "source", "EVENT_DATE", "Old_Count", "late_rows", "reason", "ingest_date", "tidemark_shard"}, ""},
		{[]string{"_tm_status"}, `--key "_tm_status": column names starting with "_tm_" are tidemark's own; name the column: --key "name=_tm_status"`},
		{[]string{"_TM_x"}, `starting with "_tm_"`},
		{[]string{"page", "page"}, `--key "page" given twice`},
		{[]string{"page", "Page"}, `--key "page" and --key "Page" both make the column "Page"`},
		{[]string{"a b"}, `--key "a b": a Delta column name cannot hold any of " ,;{}()\n\t="`},
		{[]string{"a b"}, `name the column: --key "name=a b"`},
		{[]string{"request.path", "url.path"}, `both make the column "path"`},
		{[]string{"p=request.path", "url.path"}, ""},
		{[]string{"_tm_x=a"}, `--key "_tm_x=a": column names starting with "_tm_"`},
		{[]string{"`p=q`"}, "cannot hold"},
		{[]string{"x,y"}, "cannot hold"},
		{[]string{"p=q"}, ""}, // column p of field q
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
	f.Add("request.path", "p=url.path")
	f.Add("`a.b`", "_tm_x")
	f.Fuzz(func(t *testing.T, a, b string) {
		keys := []string{a, b}
		if err := CheckKeys(keys); err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: error is not one line: %q", keys, err)
			}
			return
		}
		names := keyNames(keys)
		ns := newNamespace(names)
		for _, tb := range []*table{rawEventsTable(names, nil, true, tidemark.AggList{}).in(ns), quarantineTable().in(ns), windowResultsTable(names, nil, tidemark.AggList{}).in(ns), windowPartialsTable(names, nil, tidemark.AggList{}).in(ns), reconcileLogTable(names, nil, true).in(ns)} {
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

// colNamed returns the index of the column with the physical name.
func (t *table) colNamed(name string) int {
	for i, c := range t.cols {
		if c.name == name {
			return i
		}
	}
	panic("no column " + name)
}

// node is the Parquet schema node for the column. Every encoding is set
// explicitly because parquet-go's defaults are not what Spark writes
// (SPEC §4.2): strings would be DELTA_LENGTH_BYTE_ARRAY and a bare timestamp
// milliseconds.
func (c column) node() parquet.Node {
	var n parquet.Node
	switch c.kind {
	case kindTimestamp:
		n = parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.Plain)
	case kindString:
		if c.plain {
			n = parquet.Encoded(parquet.String(), &parquet.Plain)
		} else {
			n = parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
		}
	case kindLong:
		n = parquet.Encoded(parquet.Leaf(parquet.Int64Type), &parquet.Plain)
	case kindDouble:
		n = parquet.Encoded(parquet.Leaf(parquet.DoubleType), &parquet.Plain)
	case kindBool:
		n = parquet.Encoded(parquet.Leaf(parquet.BooleanType), &parquet.Plain)
	default:
		n = parquet.Encoded(parquet.Leaf(parquet.ByteArrayType), &parquet.Plain)
	}
	if c.optional {
		n = parquet.Optional(n)
	}
	return n
}

// parquetSchema is the schema parquet-go's writer wrote for the table's
// files before tidemark had its own (fileColumns): the files' must read
// as the same (checkPQ).
func (t *table) parquetSchema() *parquet.Schema {
	g := parquet.Group{}
	for _, c := range t.cols {
		g[c.name] = c.node()
	}
	return parquet.NewSchema("spark_schema", g)
}
