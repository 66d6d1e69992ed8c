package lake

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"tidemark/lake/store"
)

// payloadCodecs returns the codec of the payload column of every data file
// of a table, by file name suffix.
func payloadCodecs(t *testing.T, dir, table string) map[string]format.CompressionCodec {
	t.Helper()
	out := map[string]format.CompressionCodec{}
	err := filepath.WalkDir(filepath.Join(dir, table), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		pf, err := parquet.OpenFile(f, fi.Size())
		if err != nil {
			return err
		}
		for _, rg := range pf.Metadata().RowGroups {
			for _, c := range rg.Columns {
				name := strings.Join(c.MetaData.PathInSchema, ".")
				if name == "payload" {
					out[filepath.Base(p)] = c.MetaData.Codec
				} else if c.MetaData.Codec != format.Zstd {
					t.Errorf("%s: column %s is %s, want zstd", p, name, c.MetaData.Codec)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPayloadCodecs(t *testing.T) {
	want := map[PayloadCodec]format.CompressionCodec{PayloadZstd: format.Zstd, PayloadSnappy: format.Snappy, PayloadLZ4Raw: format.Lz4Raw}
	for codec, fc := range want {
		t.Run(string(codec), func(t *testing.T) {
			dir := t.TempDir()
			st, err := store.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(&fakeClock{now: t0})
			cfg.PayloadCodec = codec
			l, err := Open(context.Background(), st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			recs := testRecords(5000)
			if err := l.AppendBatch(context.Background(), Batch{AppID: "s", BatchID: 1, Records: recs}); err != nil {
				t.Fatal(err)
			}
			if got := scanAll(t, l, RawQuery{}); !slices.Equal(got, wantValid(recs)) {
				t.Fatalf("raw_events: got %d rows, want %d; first got %q want %q", len(got), len(wantValid(recs)), first(got), first(wantValid(recs)))
			}
			for _, table := range []string{TableRawEvents, TableQuarantine} {
				files := payloadCodecs(t, dir, table)
				if len(files) == 0 {
					t.Fatalf("%s: no data files", table)
				}
				for name, got := range files {
					if got != fc || !strings.HasSuffix(name, "."+string(codec)+".parquet") {
						t.Errorf("%s/%s: payload codec %s, want %s in a file named *.%s.parquet", table, name, got, fc, codec)
					}
				}
			}
		})
	}
}

// A lake remembers its payload codec: a run that names none uses it; a run
// naming another writes its files with that one, and the table reads both.
func TestPayloadCodecRemembered(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	open := func(c PayloadCodec) *Lake {
		t.Helper()
		cfg := testConfig(&fakeClock{now: t0})
		cfg.PayloadCodec = c
		l, err := Open(ctx, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if got := open("").Config().PayloadCodec; got != DefaultPayloadCodec {
		t.Fatalf("new lake: payload codec %s, want the default %s", got, DefaultPayloadCodec)
	}
	l := open(PayloadLZ4Raw)
	if got := l.Config().PayloadCodec; got != PayloadLZ4Raw {
		t.Fatalf("asked lz4_raw: got %s", got)
	}
	recs := testRecords(300)
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 1, Records: recs[:150]}); err != nil {
		t.Fatal(err)
	}
	l = open("")
	if got := l.Config().PayloadCodec; got != DefaultPayloadCodec {
		t.Fatalf("reopened without a codec: got %s, want the recorded %s", got, DefaultPayloadCodec)
	}
	if err := l.AppendBatch(ctx, Batch{AppID: "s", BatchID: 2, Records: recs[150:]}); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, l, RawQuery{}); !slices.Equal(got, wantValid(recs)) {
		t.Fatalf("mixed codecs: got %d rows, want %d", len(got), len(wantValid(recs)))
	}
	seen := map[format.CompressionCodec]bool{}
	for _, c := range payloadCodecs(t, dir, TableRawEvents) {
		seen[c] = true
	}
	if !seen[format.Lz4Raw] || !seen[format.Snappy] || len(seen) != 2 {
		t.Errorf("got payload codecs %v, want lz4_raw and snappy files", seen)
	}
	if _, err := ParsePayloadCodec("gzip"); err == nil {
		t.Error("ParsePayloadCodec(gzip): got no error")
	}
}
