package lake

import (
	"context"
	"slices"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// TestTypedKeysRoundTrip: BIGINT, DOUBLE, BOOLEAN and STRING key columns
// (and nulls in each) hold the keys' values in their Delta types, in
// raw_events and window_results, read back as the same canonical keys;
// a reopened lake keeps the types it was made with.
func TestTypedKeysRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := Config{
		Keys:     []string{"code", "ratio", "ok", "name"},
		KeyTypes: []KeyType{KeyLong, KeyDouble, KeyBool, KeyString},
		Window:   tidemark.WindowSpec{Size: (10 * time.Minute).Microseconds()},
		Clock:    clock.Now,
	}
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := func(v string) tidemark.KeyPart { return tidemark.KeyPart{Value: v} }
	null := tidemark.KeyPart{Null: true}
	keys := []tidemark.Key{
		tidemark.MakeKey(p("500"), p("0.25"), p("true"), p("/a")),
		tidemark.MakeKey(p("-9223372036854775808"), p("1e+21"), p("false"), p("500")),
		tidemark.MakeKey(null, null, null, null),
		tidemark.MakeKey(p("0"), p("3"), p("true"), p("")),
	}
	recs := make([]tidemark.Record, len(keys))
	var closed []WindowRow
	for i, k := range keys {
		recs[i] = tidemark.Record{Source: "s", File: "f", Offset: int64(i), Payload: []byte("{}"),
			EventTime: us(t0) + int64(i), Arrival: us(t0), Key: k}
		closed = append(closed, WindowRow{Result: tidemark.Result{
			Window: tidemark.Window{Start: us(t0), End: us(t0.Add(10 * time.Minute))},
			Key:    k, Agg: tidemark.Agg{Count: int64(i + 1)}, Final: true}})
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "app", BatchID: 1, Records: recs, Closed: closed}); err != nil {
		t.Fatal(err)
	}

	wantTypes := map[string]string{"code": "long", "ratio": "double", "ok": "boolean", "name": "string"}
	for _, name := range []string{TableRawEvents, TableWindowResults, TableReconcileLog} {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		schema, err := delta.ParseSchema(snap.Metadata.SchemaString)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range schema.Fields {
			if want, ok := wantTypes[f.Name]; ok && f.Type.Name != want {
				t.Errorf("%s column %s is %v, want %s", name, f.Name, f.Type.Name, want)
			}
		}
		if got := snap.Metadata.Configuration[confKeyTypes]; got != `["long","double","boolean","string"]` {
			t.Errorf("%s %s = %q", name, confKeyTypes, got)
		}
	}

	check := func(l *Lake) {
		t.Helper()
		var got []string
		err := l.ScanRaw(ctx, RawQuery{}, func(b RawBatch) error {
			for i := range b.N {
				got = append(got, b.Key[i].String())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range keys {
			want = append(want, k.String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("raw_events keys\n got %q\nwant %q", got, want)
		}
		rows, err := l.Windows(ctx, us(t0), us(t0.Add(time.Hour)), -1)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range rows {
			got = append(got, r.Key.String())
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("window_results keys\n got %q\nwant %q", got, want)
		}
	}
	check(l)

	// Reopened with the same keys and no types: the remembered ones hold.
	l2, err := Open(ctx, st, Config{Keys: cfg.Keys, Window: cfg.Window, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l2.Config().KeyTypes, cfg.KeyTypes) {
		t.Errorf("reopened lake's key types %v, want %v", l2.Config().KeyTypes, cfg.KeyTypes)
	}
	check(l2)
}

// TestKeyTypesAbsentIsText: a lake that records no key types (made before
// them) keeps text keys, whatever a run asks for.
func TestKeyTypesAbsentIsText(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	cfg := Config{Keys: []string{"code"}, Window: tidemark.WindowSpec{Size: time.Minute.Microseconds()}, Clock: clock.Now}
	if _, err := Open(ctx, st, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.KeyTypes = []KeyType{KeyLong}
	l, err := Open(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Config().KeyType(0) != KeyString || l.tables[TableRawEvents].def.cols[l.tables[TableRawEvents].def.keyCols()[0]].kind != kindString {
		t.Errorf("an untyped lake took types %v", l.Config().KeyTypes)
	}
}

func TestInferKeyType(t *testing.T) {
	I, F, B, S := tidemark.KeyInt, tidemark.KeyFloat, tidemark.KeyBool, tidemark.KeyText
	for _, c := range []struct {
		kinds []tidemark.KeyKind
		want  KeyType
	}{
		{nil, KeyString},
		{[]tidemark.KeyKind{I, I}, KeyLong},
		{[]tidemark.KeyKind{I, F}, KeyDouble},
		{[]tidemark.KeyKind{F, I}, KeyDouble},
		{[]tidemark.KeyKind{B, B}, KeyBool},
		{[]tidemark.KeyKind{B, I}, KeyString},
		{[]tidemark.KeyKind{I, B}, KeyString},
		{[]tidemark.KeyKind{I, S}, KeyString},
	} {
		if got := InferKeyType(c.kinds); got != c.want {
			t.Errorf("InferKeyType(%v) = %s, want %s", c.kinds, got, c.want)
		}
	}
}

// TestCheckKey: a key part that does not fit its column is named; nulls
// and text in a STRING column always fit.
func TestCheckKey(t *testing.T) {
	cfg := Config{Keys: []string{"code", "ok", "name"}, KeyTypes: []KeyType{KeyLong, KeyBool, KeyString}}
	mk := func(code string, ck tidemark.KeyKind, ok string, ok2 tidemark.KeyKind) *tidemark.Record {
		r := &tidemark.Record{Key: tidemark.MakeKey(tidemark.KeyPart{Value: code, Null: code == ""}, tidemark.KeyPart{Value: ok}, tidemark.KeyPart{Value: "x"})}
		r.SetKeyKind(0, ck)
		r.SetKeyKind(1, ok2)
		return r
	}
	if msg := cfg.CheckKey(mk("500", tidemark.KeyInt, "true", tidemark.KeyBool)); msg != "" {
		t.Errorf("fitting key refused: %s", msg)
	}
	if msg := cfg.CheckKey(mk("", tidemark.KeyText, "true", tidemark.KeyBool)); msg != "" {
		t.Errorf("null part refused: %s", msg)
	}
	for _, r := range []*tidemark.Record{
		mk("abc", tidemark.KeyText, "true", tidemark.KeyBool),
		mk("1.5", tidemark.KeyFloat, "true", tidemark.KeyBool),
		mk("1", tidemark.KeyInt, "1", tidemark.KeyInt),
	} {
		if msg := cfg.CheckKey(r); msg == "" {
			t.Errorf("key %s passed", r.Key)
		}
	}
}
