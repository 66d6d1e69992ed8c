package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCreatedBy(t *testing.T) {
	for _, tc := range []struct{ in, version, want string }{
		{"tidemark version 0.1.0-dev (build 911255ccb49a)", "0.1.0-dev", ""},
		{"tidemark version 1.2.3 (build unknown)", "", ""},
		{"tidemark version 1.2.3 (build unknown)", "1.2.4", `version "1.2.3", want "1.2.4"`},
		{"tidemark version 0(build )", "", "not a semantic version"},
		{"tidemark version (build )", "", "not a semantic version"},
		{"tidemark version 1.2.3", "", "no build"},
		{"parquet-mr version 1.12.3 (build f8dced18)", "", `application "parquet-mr"`},
		{"tidemark", "", "cannot parse"},
		{"", "", "cannot parse"},
	} {
		got := checkCreatedBy(tc.in, tc.version)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// pageType decodes the PageType from the start of a Thrift compact
// PageHeader (field 1, i32, zigzag varint).
func TestPageType(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "pages"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2, then not a header.
	if _, err := f.Write([]byte{0x15, 0x00, 0x15, 0x04, 0x15, 0x06, 0x18, 0x00}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off  int64
		want int32
		err  bool
	}{{0, 0, false}, {2, 2, false}, {4, 3, false}, {6, 0, true}, {7, 0, true}} {
		got, err := pageType(f, tc.off)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("offset %d: got %d, %v; want %d, error %v", tc.off, got, err, tc.want, tc.err)
		}
	}
	if pageTypeName(3) != "DATA_PAGE_V2" {
		t.Errorf("pageTypeName(3) = %q", pageTypeName(3))
	}
}

// A lake written by DuckDB is not what tidemark writes: -check-files names
// its created_by, its SNAPPY data files and, for a Parquet v2 file, the
// DELTA_* encodings; DuckDB's pages are v1 and are found where its
// metadata says; a lake without checkpoints fails -min-checkpoints.
func TestCheckFilesFindsForeignFiles(t *testing.T) {
	lake, input := buildLake(t, lakeOpts{})
	db, err := openDB(1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v2 := filepath.Join(lake, "raw_events", "event_date=2026-01-01", "event_hour=10", "v2.parquet")
	q := fmt.Sprintf(`COPY (SELECT 'x' || range AS s, range AS n FROM range(1000)) TO %s (FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION V2)`, sqlString(v2))
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run(context.Background(), []string{"interop", "-lake", lake, "-input", input, "-check-files", "-min-checkpoints", "1", "-max-failures", "1000"}, &out, &errb)
	if err == nil {
		t.Fatalf("got no error, want failures; report:\n%s", out.String())
	}
	for _, w := range []string{
		`application "DuckDB", want tidemark`,
		"is SNAPPY, want ZSTD",
		"v2.parquet: column s has encoding DELTA_",
		"0 checkpoints in all tables, want at least 1",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "page header at") || strings.Contains(out.String(), "first data page is") {
		t.Errorf("DuckDB's v1 data pages were not found where its metadata says:\n%s", out.String())
	}
	if _, err := os.Stat(v2); err != nil {
		t.Fatal(err)
	}
}

// FuzzPageType: any bytes give a page type or an error, never a panic.
func FuzzPageType(f *testing.F) {
	f.Add([]byte{0x15, 0x00})
	f.Add([]byte{0x15, 0x06, 0x15})
	f.Add([]byte{0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "page")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if typ, err := pageType(fh, 0); err == nil && (len(b) < 2 || b[0] != 0x15) {
			t.Fatalf("%x: got type %d, want an error", b, typ)
		}
	})
}

// FuzzCheckCreatedBy: any string is judged without a panic, and one it
// accepts names tidemark, a semantic version and a build.
func FuzzCheckCreatedBy(f *testing.F) {
	f.Add("tidemark version 0.1.0-dev (build 911255ccb49a)")
	f.Add("tidemark version 0(build )")
	f.Add("parquet-mr version 1.12.3 (build f8dced18)")
	f.Add("tidemark  version  1.2.3  (  build  x  )")
	f.Fuzz(func(t *testing.T, s string) {
		if checkCreatedBy(s, "") != "" {
			return
		}
		m := parquetMRVersion.FindStringSubmatch(s)
		if m == nil || m[1] != "tidemark" || !parquetMRSemver.MatchString(m[2]) || m[3] == "" {
			t.Fatalf("%q accepted, parsed as %q", s, m)
		}
	})
}
