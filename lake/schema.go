package lake

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"tidemark"
	"tidemark/lake/colfile"
)

// kind is the type of one table column, as Delta (Spark) names it.
type kind uint8

const (
	kindTimestamp kind = iota // int64 µs UTC; TIMESTAMP(MICROS, isAdjustedToUTC=true)
	kindString                // UTF-8 bytes
	kindLong                  // int64
	kindDouble                // float64
	kindBool                  // boolean
	kindBinary                // raw bytes
)

// deltaType is the Spark SQL type name used in the Delta schemaString.
func (k kind) deltaType() string {
	switch k {
	case kindTimestamp:
		return "timestamp"
	case kindString:
		return "string"
	case kindLong:
		return "long"
	case kindDouble:
		return "double"
	case kindBool:
		return "boolean"
	default:
		return "binary"
	}
}

// column is one data column of a table (partition columns are not stored in
// the data files, as Spark does).
type column struct {
	name string // physical: the name in the files and the Delta schema
	own  string // tidemark's own column: its logical name (set by newTable)
	key  bool   // a key column: named by the user, never renamed
	// user: an --agg column (window_results' aggregates, raw_events'
	// inputs): named by the user, never renamed, found by position
	// (table.user).
	user     bool
	kind     kind
	optional bool // OPTIONAL in Parquet; otherwise REQUIRED
	plain    bool // strings: PLAIN instead of dictionary (high cardinality)
	payload  bool // the raw line: compressed with the table's payload codec
}

// fileType is the column's type in a data file.
func (k kind) fileType() colfile.Type {
	switch k {
	case kindTimestamp:
		return colfile.Timestamp
	case kindString:
		return colfile.String
	case kindLong:
		return colfile.Int64
	case kindDouble:
		return colfile.Double
	case kindBool:
		return colfile.Boolean
	}
	return colfile.ByteArray
}

// table describes one Delta table of the lake: its data columns (in schema
// order) and its partition columns (strings, in directory order).
type table struct {
	name     string
	cols     []column
	partCols []string       // physical names
	index    map[string]int // own column's logical name -> index in cols
	keys     []int          // indexes in cols of the key columns, in key order
	user     []int          // indexes in cols of the --agg columns, in list order
	ns       namespace      // own names stored under another name in this lake
	// payload is the codec of the payload column (column.payload), which
	// holds most of a raw table's bytes; zstd unless the lake says otherwise.
	payload PayloadCodec
}

// newTable makes a table of key columns (keyColumns) and own columns,
// the latter named by their logical names until in renames them.
func newTable(name string, partCols []string, cols ...column) *table {
	cols = slices.Clone(cols)
	t := &table{name: name, cols: cols, partCols: slices.Clone(partCols), index: make(map[string]int, len(cols)), payload: PayloadZstd}
	for i := range t.cols {
		c := &t.cols[i]
		if c.key {
			t.keys = append(t.keys, i)
			continue
		}
		if c.user {
			t.user = append(t.user, i)
			continue
		}
		if c.own == "" {
			c.own = c.name
		}
		t.index[c.own] = i
	}
	return t
}

// in returns the table with its own columns (partition columns included)
// under their names in namespace ns.
func (t *table) in(ns namespace) *table {
	t.ns = ns
	for i := range t.cols {
		if c := &t.cols[i]; c.own != "" {
			c.name = ns.phys(c.own)
		}
	}
	for i, p := range t.partCols {
		t.partCols[i] = ns.phys(p)
	}
	return t
}

// col returns the index of the own column with the logical name; it panics
// on a name the table does not have, which is a programming error inside
// this package.
func (t *table) col(name string) int {
	i, ok := t.index[name]
	if !ok {
		panic(fmt.Sprintf("lake: table %s has no column %q", t.name, name))
	}
	return i
}

// phys returns the physical name of an own column or partition column,
// given its logical name: what the files, the Delta stats and the
// partition values call it.
func (t *table) phys(name string) string { return t.ns.phys(name) }

// keyCols returns the indexes of the key columns, in key order.
func (t *table) keyCols() []int { return t.keys }

// fileColumns returns the table's columns as its data files hold them,
// in the files' order (by name, as parquet-go's schema orders a group's
// fields: the files' layout did not change when tidemark's own writer
// replaced parquet-go's; readers resolve columns by name), and for each
// the index of its table column. Numbers and strings not marked plain may
// be dictionary-encoded; the payload column has the table's payload codec,
// the others zstd (its fastest level: appends are on the stream's critical
// path, and the default level costs ~25% more time for ~5% smaller files).
func (t *table) fileColumns() ([]colfile.Column, []int) {
	order := make([]int, len(t.cols))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(t.cols[a].name, t.cols[b].name) })
	cols := make([]colfile.Column, len(order))
	for leaf, i := range order {
		c := t.cols[i]
		fc := colfile.Column{Name: c.name, Type: c.kind.fileType(), Optional: c.optional, Codec: colfile.Zstd}
		switch c.kind {
		case kindTimestamp, kindLong, kindDouble:
			fc.Dictionary = true
		case kindString:
			fc.Dictionary = !c.plain
		}
		if c.payload {
			fc.Codec = t.payload.fileCodec()
		}
		cols[leaf] = fc
	}
	return cols, order
}

// schemaString renders the Delta schemaString: data columns then partition
// columns (strings), every field nullable as Spark writes them.
func (t *table) schemaString() string {
	type field struct {
		Name     string         `json:"name"`
		Type     string         `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}
	s := struct {
		Type   string  `json:"type"`
		Fields []field `json:"fields"`
	}{Type: "struct"}
	for _, c := range t.cols {
		s.Fields = append(s.Fields, field{c.name, c.kind.deltaType(), true, map[string]any{}})
	}
	for _, p := range t.partCols {
		s.Fields = append(s.Fields, field{p, "string", true, map[string]any{}})
	}
	b, _ := json.Marshal(s) // cannot fail: plain strings and bools
	return string(b)
}

// Table names in the lake.
const (
	TableRawEvents     = "raw_events"
	TableQuarantine    = "quarantine"
	TableWindowResults = "window_results"
	TableReconcileLog  = "reconcile_log"
	// TableWindowPartials holds each stream's (shard's) own aggregates per
	// window key; window_results holds their merge (see shard.go).
	TableWindowPartials = "window_partials"
)

// tableNames lists the lake's tables in a fixed order.
var tableNames = []string{TableRawEvents, TableQuarantine, TableWindowResults, TableReconcileLog, TableWindowPartials}

// keyColumns are the key columns, of the types given (text past types).
func keyColumns(keys []string, types []KeyType) []column {
	out := make([]column, len(keys))
	for i, k := range keys {
		kd := kindString
		if i < len(types) {
			kd = types[i].kind()
		}
		out[i] = column{name: k, kind: kd, optional: true, key: true}
	}
	return out
}

func cat(parts ...[]column) []column {
	var out []column
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// rawEventsTable: SPEC §4.1. value exists only with a value field; the
// --agg inputs' columns (inputColumns) follow it.
func rawEventsTable(keys []string, types []KeyType, hasValue bool, aggs tidemark.AggList) *table {
	var value []column
	if hasValue {
		value = []column{{name: "value", kind: kindDouble, optional: true}}
	}
	value = append(value, inputColumns(aggs)...)
	return newTable(TableRawEvents, []string{"event_date", "event_hour"}, cat(
		[]column{
			{name: "event_time", kind: kindTimestamp},
			{name: "arrival_time", kind: kindTimestamp},
			{name: "ingest_time", kind: kindTimestamp},
		},
		keyColumns(keys, types),
		value,
		[]column{
			{name: "status", kind: kindString},
			{name: "disorder_us", kind: kindLong},
			{name: "source", kind: kindString},
			{name: "file", kind: kindString},
			// The file's identity (docs/file-identity.md): (file_id, offset)
			// names one line for good. Null in rows written before it.
			{name: ColFileID, kind: kindString, optional: true},
			{name: "offset", kind: kindLong},
			{name: "batch_id", kind: kindLong},
			// binary, not string: the line is byte-exact and DuckDB refuses
			// invalid UTF-8 in a VARCHAR; cast(payload AS string) reads it.
			{name: "payload", kind: kindBinary, payload: true},
		},
	)...)
}

func quarantineTable() *table {
	return newTable(TableQuarantine, []string{"ingest_date"},
		column{name: "reason", kind: kindString},
		column{name: "error", kind: kindString, plain: true},
		column{name: "source", kind: kindString},
		column{name: "file", kind: kindString},
		column{name: ColFileID, kind: kindString, optional: true},
		column{name: "offset", kind: kindLong},
		column{name: "ingest_time", kind: kindTimestamp},
		column{name: "batch_id", kind: kindLong},
		column{name: "payload", kind: kindBinary, payload: true},
	)
}

// inputColumns are raw_events' columns of the --agg inputs, one per
// tidemark.AggList input in order: DOUBLE for a number, STRING for a
// distinct count's text, null where the line has none. Named after the
// field; a text input whose name a number input has too gets _text.
func inputColumns(aggs tidemark.AggList) []column {
	names := inputNames(aggs)
	out := make([]column, len(names))
	for i, in := range aggs.Inputs {
		kd := kindDouble
		if in.Text {
			kd = kindString
		}
		out[i] = column{name: names[i], kind: kd, optional: true, user: true}
	}
	return out
}

// inputNames returns raw_events' column names of aggs' inputs.
func inputNames(aggs tidemark.AggList) []string {
	out := make([]string, len(aggs.Inputs))
	for i, in := range aggs.Inputs {
		out[i] = in.Field.Name
		if !in.Text {
			continue
		}
		for _, o := range aggs.Inputs {
			if !o.Text && strings.EqualFold(o.Field.Name, in.Field.Name) {
				out[i] += "_text"
				break
			}
		}
	}
	return out
}

// aggColumns are window_results' columns of the --agg aggregates (in list
// order; BIGINT counts, DOUBLE otherwise, null over no values), then
// exact (false for the stream's estimates, true once recomputed from
// raw_events) and agg_state (tidemark.AggState's encoding, which shards
// and restarts merge). A lake without --agg has none of them.
func aggColumns(aggs tidemark.AggList) []column {
	if aggs.Empty() {
		return nil
	}
	var out []column
	for _, a := range aggs.Specs {
		kd := kindDouble
		if a.Integer() {
			kd = kindLong
		}
		out = append(out, column{name: a.Column(), kind: kd, optional: true, user: true})
	}
	return append(out,
		column{name: ColExact, kind: kindBool},
		column{name: ColAggState, kind: kindBinary, optional: true},
	)
}

// window_results' own columns of a lake with --agg.
const (
	ColExact    = "exact"
	ColAggState = "agg_state"
)

func windowResultsTable(keys []string, types []KeyType, aggs tidemark.AggList) *table {
	return newTable(TableWindowResults, []string{"window_date"}, cat(
		[]column{
			{name: "window_start", kind: kindTimestamp},
			{name: "window_end", kind: kindTimestamp},
		},
		keyColumns(keys, types),
		[]column{
			{name: "count", kind: kindLong},
			{name: "sum", kind: kindDouble, optional: true},
			{name: "min", kind: kindDouble, optional: true},
			{name: "max", kind: kindDouble, optional: true},
			{name: "final", kind: kindBool},
			{name: "origin", kind: kindString},
			{name: "revision", kind: kindLong},
			{name: "computed_at", kind: kindTimestamp},
			{name: "watermark", kind: kindTimestamp, optional: true},
		},
		aggColumns(aggs),
	)...)
}

// windowPartialsTable is window_results' schema partitioned by shard (the
// stream id) first: each stream rewrites only its own partitions, so the
// streams' partial upserts never conflict with one another.
func windowPartialsTable(keys []string, types []KeyType, aggs tidemark.AggList) *table {
	t := windowResultsTable(keys, types, aggs)
	return newTable(TableWindowPartials, []string{colShard, "window_date"}, t.cols...)
}

// colShard is window_partials' shard partition column.
const colShard = "tidemark_shard"

// reconcileLogTable is unpartitioned: one small row per corrected window.
// A session lake's has replaced_start and replaced_end too: the stored
// session a correction replaced (null when none was stored), so that a
// late row that merged n emitted sessions shows as n rows naming them.
func reconcileLogTable(keys []string, types []KeyType, sessions bool) *table {
	var replaced []column
	if sessions {
		replaced = []column{
			{name: ColReplacedStart, kind: kindTimestamp, optional: true},
			{name: ColReplacedEnd, kind: kindTimestamp, optional: true},
		}
	}
	return newTable(TableReconcileLog, nil, cat(
		[]column{
			{name: "run_id", kind: kindString},
			{name: "window_start", kind: kindTimestamp},
			{name: "window_end", kind: kindTimestamp},
		},
		keyColumns(keys, types),
		[]column{
			{name: "old_count", kind: kindLong, optional: true},
			{name: "new_count", kind: kindLong},
			{name: "old_sum", kind: kindDouble, optional: true},
			{name: "new_sum", kind: kindDouble, optional: true},
			{name: "old_min", kind: kindDouble, optional: true},
			{name: "new_min", kind: kindDouble, optional: true},
			{name: "old_max", kind: kindDouble, optional: true},
			{name: "new_max", kind: kindDouble, optional: true},
			{name: "late_rows", kind: kindLong},
			{name: "corrected_at", kind: kindTimestamp},
		},
		replaced,
	)...)
}

// badNameChars are the characters Delta refuses in a column name without
// column mapping (Spark's ParquetSchemaConverter.checkFieldName).
const badNameChars = " ,;{}()\n\t="

// ownColumns maps the lower-cased name of every column of the lake's four
// tables, partition columns included, to its name.
var ownColumns = func() map[string]string {
	own := map[string]string{}
	oneAgg, _ := tidemark.ParseAggs([]string{"max(x)"}) // for exact and agg_state
	for _, t := range []*table{rawEventsTable(nil, nil, true, tidemark.AggList{}), quarantineTable(), windowResultsTable(nil, nil, oneAgg), reconcileLogTable(nil, nil, true), windowPartialsTable(nil, nil, tidemark.AggList{})} {
		for _, i := range t.user {
			t.cols[i].name = "" // the example's aggregate column is no own column
		}
		for _, c := range t.cols {
			if c.name != "" {
				own[strings.ToLower(c.name)] = c.name
			}
		}
		for _, p := range t.partCols {
			own[strings.ToLower(p)] = p
		}
	}
	// Not a column: --print's marker of a shard's partial result, which
	// must not share a name with a key either.
	own["shard_partial"] = "shard_partial"
	return own
}()

// ownPrefix starts the name an own column takes in a lake where a key
// column has its name.
const ownPrefix = "_tm_"

// namespace maps the logical name of each of tidemark's own columns that a
// lake stores under another name to that name. The zero namespace renames
// nothing: a lake whose keys take none of tidemark's names (every lake made
// before keys could) has its columns under their logical names.
type namespace map[string]string

// newNamespace is the namespace of a lake with the key columns keys: an own
// column (of any table, partition columns included) whose name a key takes,
// ignoring case as Spark and DuckDB match names, is stored as _tm_<name>
// in every table of that lake. Keys starting with _tm_ are refused
// (CheckKeys), so the renamed columns never collide with a key.
func newNamespace(keys []string) namespace {
	var ns namespace
	for _, k := range keys {
		if o := ownColumns[strings.ToLower(k)]; o != "" {
			if ns == nil {
				ns = namespace{}
			}
			ns[o] = ownPrefix + o
		}
	}
	return ns
}

// phys returns the physical name of the own column logical.
func (ns namespace) phys(logical string) string {
	if p, ok := ns[logical]; ok {
		return p
	}
	return logical
}

// CheckKeys reports, in one line, why key specs (--key values, see
// tidemark.ParseField) cannot be a lake's grouping columns, or nil if they
// can. Each key becomes a column of raw_events, window_results and
// reconcile_log under its name, and Spark, DuckDB and Trino resolve column
// names ignoring case, so two keys must not make one column ("Status" is
// "status" to them); a name must hold none of the characters Delta does
// not allow in a column name without column mapping, and must not start
// with _tm_, where tidemark's own columns go when a key takes their name
// (namespace).
func CheckKeys(specs []string) error {
	fields, err := tidemark.ParseKeys(specs)
	if err != nil {
		return err
	}
	for i, f := range fields {
		switch k := f.Name; {
		case strings.ContainsAny(k, badNameChars):
			return fmt.Errorf("--key %q: a Delta column name cannot hold any of %q (Spark refuses the table); name the column: --key %q", specs[i], badNameChars, "name="+tidemark.FormatPath(f.Path))
		case strings.HasPrefix(strings.ToLower(k), ownPrefix):
			return fmt.Errorf("--key %q: column names starting with %q are tidemark's own; name the column: --key %q", specs[i], ownPrefix, "name="+tidemark.FormatPath(f.Path))
		}
	}
	return nil
}

// keyNames returns the column names of key specs CheckKeys accepts.
func keyNames(specs []string) []string {
	fields, _ := tidemark.ParseKeys(specs)
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Name
	}
	return out
}

// CheckAggs reports, in one line, why aggs cannot be the aggregate list of
// a lake with the key specs keys (which CheckKeys accepts), or nil if they
// can. Each aggregate becomes a window_results column and each input a
// raw_events column, beside the keys: no two may make one column
// (ignoring case), and their names obey CheckKeys' rules. An input named
// like one of tidemark's own columns moves it aside as a key does
// (namespace).
func CheckAggs(keys []string, aggs tidemark.AggList) error {
	taken := map[string]string{} // lower-cased column -> what makes it
	for _, k := range keyNames(keys) {
		taken[strings.ToLower(k)] = "the key " + k
	}
	check := func(col, what string, a tidemark.AggSpec) error {
		hint := fmt.Sprintf("name the field: --agg '%s'", renamedAgg(a))
		switch {
		case strings.ContainsAny(col, badNameChars):
			return fmt.Errorf("--agg %q: its column %q holds one of %q, which a Delta column name cannot (Spark refuses the table); %s", a.String(), col, badNameChars, hint)
		case strings.HasPrefix(strings.ToLower(col), ownPrefix):
			return fmt.Errorf("--agg %q: column names starting with %q are tidemark's own; %s", a.String(), ownPrefix, hint)
		}
		if prev, ok := taken[strings.ToLower(col)]; ok && prev != what {
			return fmt.Errorf("--agg %q: its %s would be named %q like %s (Spark and DuckDB match column names ignoring case); %s", a.String(), strings.SplitN(what, " ", 2)[0], col, prev, hint)
		}
		taken[strings.ToLower(col)] = what
		return nil
	}
	names := inputNames(aggs)
	for i, in := range aggs.Inputs {
		a := firstReader(aggs, in)
		if err := check(names[i], "input "+in.String(), a); err != nil {
			return err
		}
	}
	for _, a := range aggs.Specs {
		col := a.Column()
		if o, ok := ownColumns[strings.ToLower(col)]; ok {
			return fmt.Errorf("--agg %q: its column %q is one of tidemark's own (%s); name the field: --agg '%s'", a.String(), col, o, renamedAgg(a))
		}
		if err := check(col, "column "+col, a); err != nil {
			return err
		}
	}
	return nil
}

// firstReader returns the first aggregate of aggs that reads in.
func firstReader(aggs tidemark.AggList, in tidemark.AggInput) tidemark.AggSpec {
	for _, a := range aggs.Specs {
		if a.Text() == in.Text && slices.Equal(a.Field.Path, in.Field.Path) {
			return a
		}
	}
	return tidemark.AggSpec{}
}

// renamedAgg spells a with its field named anew (the path's segments
// joined, and a 2 if that is its name already), for hints.
func renamedAgg(a tidemark.AggSpec) string {
	b := a
	b.Field.Name = strings.Join(a.Field.Path, "_")
	if strings.EqualFold(b.Field.Name, a.Field.Name) {
		b.Field.Name = "agg_" + b.Field.Name
	}
	return b.String()
}
