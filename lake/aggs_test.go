package lake

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

func mustAggs(t testing.TB, specs ...string) tidemark.AggList {
	t.Helper()
	l, err := tidemark.ParseAggs(specs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func aggConfig(t testing.TB, clock *fakeClock) Config {
	cfg := testConfig(clock)
	cfg.Aggs = mustAggs(t, "avg(lat)", "p95(lat)", "count_distinct(user)", "max(req.bytes)", "count_distinct(lat)")
	return cfg
}

// aggRecord is a valid record of page p with the inputs of aggConfig.
func aggRecord(i int, p string, lat float64, user string, bytes float64, hasBytes bool) tidemark.Record {
	r := testRecords(1)[0]
	r.Reason, r.Err = tidemark.ReasonNone, ""
	r.EventTime = us(t0) + int64(i)
	r.Offset = int64(i)
	r.Key = tidemark.MakeKey(tidemark.KeyPart{Value: p}, tidemark.KeyPart{Value: "eu"})
	if !hasBytes {
		bytes = 0 // an absent value is the zero AggValue
	}
	r.Fields = []tidemark.AggValue{{Num: lat, Present: true}, {Text: user, Present: user != ""}, {Num: bytes, Present: hasBytes}, {Text: strconv.FormatFloat(lat, 'g', -1, 64), Present: true}}
	return r
}

func schemaOf(t testing.TB, l *Lake, name string) string {
	t.Helper()
	snap, err := l.tables[name].dt.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Metadata.SchemaString
}

// TestAggsLake: a lake with --agg has a column per aggregate, exact and
// agg_state in its window tables and a column per input in raw_events;
// the rows carry them through a write and a read.
func TestAggsLake(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := aggConfig(t, clock)
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"name":"avg_lat","type":"double"`, `{"name":"p95_lat","type":"double"`, `{"name":"count_distinct_user","type":"long"`, `{"name":"max_bytes","type":"double"`, `{"name":"count_distinct_lat","type":"long"`, `{"name":"exact","type":"boolean"`, `{"name":"agg_state","type":"binary"`} {
		for _, tb := range []string{TableWindowResults, TableWindowPartials} {
			if s := schemaOf(t, l, tb); !strings.Contains(s, want) {
				t.Errorf("%s schema lacks %s: %s", tb, want, s)
			}
		}
	}
	for _, want := range []string{`{"name":"lat","type":"double"`, `{"name":"user","type":"string"`, `{"name":"bytes","type":"double"`, `{"name":"lat_text","type":"string"`} {
		if s := schemaOf(t, l, TableRawEvents); !strings.Contains(s, want) {
			t.Errorf("raw_events schema lacks %s: %s", want, s)
		}
	}

	// raw_events: the inputs come back as written.
	var recs []tidemark.Record
	state := cfg.Aggs.NewState()
	for i := range 200 {
		r := aggRecord(i, "home", float64(i%37)+0.5, "u"+strconv.Itoa(i%13), float64(i), i%4 != 0)
		if i%50 == 0 {
			r.Fields[1] = tidemark.AggValue{} // no user
		}
		recs = append(recs, r)
		cfg.Aggs.Add(state, r.Fields)
	}
	w := tidemark.Window{Start: us(t0), End: us(t0) + (10 * time.Minute).Microseconds()}
	closed := []WindowRow{{Result: tidemark.Result{Window: w, Key: recs[0].Key, Agg: tidemark.Agg{Count: 200}, State: state}, Origin: OriginStream, Revision: 1}}
	if err := l.AppendBatch(ctx, Batch{AppID: "a", BatchID: 1, Records: recs, Closed: closed}); err != nil {
		t.Fatal(err)
	}
	var got [][]tidemark.AggValue
	err = l.ScanRaw(ctx, RawQuery{Columns: []string{ColOffset, ColFields}}, func(b RawBatch) error {
		if len(b.Fields) != len(cfg.Aggs.Inputs) {
			t.Fatalf("RawBatch.Fields has %d inputs, want %d", len(b.Fields), len(cfg.Aggs.Inputs))
		}
		for i := range b.N {
			row := make([]tidemark.AggValue, len(b.Fields))
			for j := range b.Fields {
				row[j] = b.Fields[j][i]
			}
			got = append(got, row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("scanned %d rows, want %d", len(got), len(recs))
	}
	for i := range got {
		if !slices.Equal(got[i], recs[i].Fields) {
			t.Fatalf("row %d: fields %v, want %v", i, got[i], recs[i].Fields)
		}
	}

	// window_results: the values, exact=false and the state.
	rows, err := l.Windows(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d window rows, want 1", len(rows))
	}
	r := rows[0]
	if want := cfg.Aggs.Values(state); !slices.Equal(r.Aggs, want) || r.Exact {
		t.Errorf("window row aggs %v exact %v, want %v exact false", r.Aggs, r.Exact, want)
	}
	if r.State == nil || !slices.Equal(cfg.Aggs.Values(r.State), r.Aggs) || r.State.Absorbed()[0] != 200 {
		t.Errorf("window row state gives %v (absorbed %v), want %v (200)", cfg.Aggs.Values(r.State), r.State.Absorbed(), r.Aggs)
	}
	// An exact row replaces it with its own values, and stays exact when read.
	exact := r
	exact.Aggs = slices.Clone(r.Aggs)
	exact.Aggs[1] = tidemark.AggOut{V: 35.5, Valid: true}
	exact.Exact, exact.Origin = true, OriginBatch
	if err := l.Upsert(ctx, []WindowRow{exact}, "reconcile", 1, nil); err != nil {
		t.Fatal(err)
	}
	rows, err = l.Windows(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; !r.Exact || r.Aggs[1].V != 35.5 || r.Origin != OriginBatch {
		t.Errorf("after the exact upsert: exact %v p95 %v origin %s, want true 35.5 batch", r.Exact, r.Aggs[1], r.Origin)
	}

	// The lake remembers its list: a run without it adopts it, another is refused.
	l2, err := Open(ctx, st, Config{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !l2.Config().Aggs.Equal(cfg.Aggs) {
		t.Errorf("adopted aggs %v, want %v", l2.Config().Aggs.Strings(), cfg.Aggs.Strings())
	}
	other := cfg
	other.Aggs = mustAggs(t, "avg(lat)")
	_, err = Open(ctx, st, other)
	if !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "give the same --agg flags in the same order") || !strings.Contains(err.Error(), "--agg 'p95(lat)'") {
		t.Errorf("Open with another --agg list: %v", err)
	}
	none := cfg
	none.Aggs = tidemark.AggList{}
	if _, err = Open(ctx, st, none); !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), "this run asks for no --agg") {
		t.Errorf("Open without --agg on a lake with them: %v", err)
	}
}

// TestNoAggsSchemaUnchanged: a lake without --agg has exactly the columns
// it had before --agg, and remembers no aggregate list.
func TestNoAggsSchemaUnchanged(t *testing.T) {
	l, _, _ := openTestLake(t)
	for _, tb := range tableNames {
		s := schemaOf(t, l, tb)
		for _, c := range []string{`"exact"`, `"agg_state"`} {
			if strings.Contains(s, c) {
				t.Errorf("%s of a lake without --agg has %s: %s", tb, c, s)
			}
		}
	}
	snap, err := l.tables[TableRawEvents].dt.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := snap.Metadata.Configuration[confAggs]; ok {
		t.Errorf("a lake without --agg remembers %s=%s", confAggs, v)
	}
	want := `{"type":"struct","fields":[{"name":"window_start","type":"timestamp","nullable":true,"metadata":{}},{"name":"window_end","type":"timestamp","nullable":true,"metadata":{}},{"name":"page","type":"string","nullable":true,"metadata":{}},{"name":"region","type":"string","nullable":true,"metadata":{}},{"name":"count","type":"long","nullable":true,"metadata":{}},{"name":"sum","type":"double","nullable":true,"metadata":{}},{"name":"min","type":"double","nullable":true,"metadata":{}},{"name":"max","type":"double","nullable":true,"metadata":{}},{"name":"final","type":"boolean","nullable":true,"metadata":{}},{"name":"origin","type":"string","nullable":true,"metadata":{}},{"name":"revision","type":"long","nullable":true,"metadata":{}},{"name":"computed_at","type":"timestamp","nullable":true,"metadata":{}},{"name":"watermark","type":"timestamp","nullable":true,"metadata":{}},{"name":"window_date","type":"string","nullable":true,"metadata":{}}]}`
	if got := schemaOf(t, l, TableWindowResults); got != want {
		t.Errorf("window_results schema changed:\n got %s\nwant %s", got, want)
	}
}

func TestCheckAggs(t *testing.T) {
	for _, c := range []struct {
		keys []string
		aggs []string
		want string
	}{
		{[]string{"page"}, []string{"p95(lat)", "count_distinct(user)"}, ""},
		{[]string{"page"}, []string{"count_distinct(page)"}, `its input would be named "page" like the key page`},
		{[]string{"p95_lat"}, []string{"p95(lat)"}, `its column would be named "p95_lat" like the key p95_lat (Spark and DuckDB match column names ignoring case); name the field: --agg 'p95(agg_lat=lat)'`},
		{[]string{"page"}, []string{"p95(a.lat)", "avg(b.lat)"}, `name the field: --agg 'avg(b_lat=b.lat)'`},
		{[]string{"page"}, []string{"max(`a b`)"}, "a Delta column name cannot"},
		{[]string{"page"}, []string{"max(_tm_x)"}, "tidemark's own"},
		{[]string{"page"}, []string{"max(offset)", "p95(status)"}, ""}, // own raw columns move aside
	} {
		err := CheckAggs(c.keys, mustAggs(t, c.aggs...))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckAggs(%q, %q): %v", c.keys, c.aggs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckAggs(%q, %q) = %v, want an error with %q", c.keys, c.aggs, err, c.want)
		}
	}
}

// TestAggsInputTakesOwnName: an input named like one of raw_events' own
// columns gets the name, and the own column moves aside as for a key.
func TestAggsInputTakesOwnName(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := testConfig(clock)
	cfg.Aggs = mustAggs(t, "max(offset)")
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := schemaOf(t, l, TableRawEvents)
	if !strings.Contains(s, `{"name":"offset","type":"double"`) || !strings.Contains(s, `{"name":"_tm_offset","type":"long"`) {
		t.Errorf("raw_events schema: %s", s)
	}
	r := aggRecord(1, "home", 1, "", 0, false)
	r.Fields = []tidemark.AggValue{{Num: 42, Present: true}}
	if err := l.AppendBatch(ctx, Batch{AppID: "a", BatchID: 1, Records: []tidemark.Record{r}}); err != nil {
		t.Fatal(err)
	}
	err = l.ScanRaw(ctx, RawQuery{Columns: []string{ColOffset, ColFields}}, func(b RawBatch) error {
		if b.N != 1 || b.Offset[0] != r.Offset || b.Fields[0][0].Num != 42 {
			t.Errorf("scanned offset %v fields %v", b.Offset, b.Fields)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAggsShardsMerge: three streams' partials of one window key merge
// into window_results: counts, sums and maxima exactly, percentiles and
// distinct counts as one sketch of every row would give them.
func TestAggsShardsMerge(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := aggConfig(t, clock)
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	whole := cfg.Aggs.NewState()
	var lats []float64
	users := map[string]bool{}
	wm := us(t0) + (20 * time.Minute).Microseconds()
	w := tidemark.Window{Start: us(t0), End: us(t0) + (10 * time.Minute).Microseconds()}
	key := tidemark.MakeKey(tidemark.KeyPart{Value: "home"}, tidemark.KeyPart{Value: "eu"})
	for s, id := range []string{"a", "b", "c"} {
		state := cfg.Aggs.NewState()
		var recs []tidemark.Record
		for i := range 3000 {
			lat := math.Exp(rng.NormFloat64() + 4)
			u := "u" + strconv.Itoa(rng.IntN(2000))
			r := aggRecord(s*10000+i, "home", lat, u, float64(i), true)
			recs = append(recs, r)
			cfg.Aggs.Add(state, r.Fields)
			cfg.Aggs.Add(whole, r.Fields)
			lats = append(lats, lat)
			users[u] = true
		}
		row := WindowRow{Result: tidemark.Result{Window: w, Key: key, Agg: tidemark.Agg{Count: 3000}, Final: true, State: state}, Origin: OriginStream, Revision: 1, Watermark: &wm}
		clock.advance(time.Second)
		if err := l.AppendBatch(ctx, Batch{AppID: id, BatchID: 1, Records: recs, Closed: []WindowRow{row}, Watermark: &wm}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := l.Windows(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d window rows, want 1", len(rows))
	}
	r := rows[0]
	if r.Agg.Count != 9000 || r.State == nil || r.State.Absorbed()[0] != 9000 {
		t.Fatalf("merged count %d, absorbed %v; want 9000 each", r.Agg.Count, r.State.Absorbed())
	}
	want := cfg.Aggs.Values(whole)
	for i, a := range cfg.Aggs.Specs {
		if math.Abs(r.Aggs[i].V-want[i].V) > 1e-9*math.Abs(want[i].V) {
			t.Errorf("%s merged %v, one state of every row %v", a, r.Aggs[i], want[i])
		}
	}
	slices.Sort(lats)
	if p95 := lats[int(0.95*float64(len(lats)-1))]; math.Abs(r.Aggs[1].V-p95) > tidemark.QuantileAccuracy*p95 {
		t.Errorf("merged p95 %v, nearest rank %v: beyond 1%%", r.Aggs[1].V, p95)
	}
	if n := float64(len(users)); math.Abs(r.Aggs[2].V-n) > 3*tidemark.DistinctError*n {
		t.Errorf("merged distinct users %v, exact %v: beyond 3 standard errors", r.Aggs[2].V, n)
	}
	parts, err := l.Partials(ctx, AllFrom, AllTo, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Errorf("%d partials, want 3", len(parts))
	}
}

// TestAggStateCorruptRow: a window row whose agg_state does not decode is
// an error naming the file, not a crash or a silent empty state.
func TestAggStateCorruptRow(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := aggConfig(t, clock)
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := cfg.Aggs.NewState()
	bad.Moments = bad.Moments[:1] // the shape of another list
	row := WindowRow{Result: tidemark.Result{Window: tidemark.Window{Start: us(t0), End: us(t0) + 1}, Key: tidemark.MakeKey(tidemark.KeyPart{Value: "x"}, tidemark.KeyPart{Value: "y"}), Agg: tidemark.Agg{Count: 1}, State: bad}, Origin: OriginStream, Revision: 1, Aggs: make([]tidemark.AggOut, len(cfg.Aggs.Specs))}
	if err := l.Upsert(ctx, []WindowRow{row}, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Windows(ctx, AllFrom, AllTo, 0); !errors.Is(err, tidemark.ErrAggState) {
		t.Errorf("reading a row of another shape: %v, want ErrAggState", err)
	}
}
