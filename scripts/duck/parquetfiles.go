package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// parquet-mr's VersionParser.FORMAT and SemanticVersion's FORMAT
// (org.apache.parquet, parquet-common) as Go regexps; Java's
// Matcher.matches() needs the whole string, hence ^...$. A created_by these
// do not parse makes parquet-mr distrust the file's binary statistics.
var (
	parquetMRVersion = regexp.MustCompile(`^(?:(.*?)\s+version\s*(?:([^(]*?)\s*(?:\(\s*build\s*([^)]*?)\s*\))?)?)$`)
	parquetMRSemver  = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)([^-+]*)?(?:-([^+]*))?(?:\+(.*))?$`)
)

// valueEncodings are the encodings Spark, delta-rs and every Parquet reader
// handle: PLAIN and dictionary for values, RLE/BIT_PACKED for levels. No
// DELTA_*: parquet-go's default for strings, which some readers lack.
var valueEncodings = map[string]bool{"PLAIN": true, "PLAIN_DICTIONARY": true, "RLE_DICTIONARY": true, "RLE": true, "BIT_PACKED": true}

// parquetFilesReport is what checkParquetFiles verified.
type parquetFilesReport struct {
	DataFiles   int `json:"data_files"`
	Checkpoints int `json:"checkpoints"`
	Chunks      int `json:"column_chunks"`
	// CreatedBy lists the distinct created_by values seen.
	CreatedBy []string `json:"created_by"`
}

// parquetFile is one Parquet file of a table and the codec it must have,
// and its payload column (the lake's --payload-codec, named by the data
// file: part-<uuid>.<codec>.parquet).
type parquetFile struct {
	path, codec, payload string
}

// payloadCodecs maps a data file name's codec to DuckDB's name for it.
var payloadCodecs = map[string]string{"zstd": "ZSTD", "snappy": "SNAPPY", "lz4_raw": "LZ4_RAW"}

// tableParquetFiles lists every Parquet file under a table directory (all
// data files, active or not, and every checkpoint in _delta_log), sorted.
func tableParquetFiles(dir string) ([]parquetFile, error) {
	var out []parquetFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		codec := "ZSTD" // SPEC §4.2: data files are zstd
		payload := codec
		if filepath.Base(filepath.Dir(p)) == "_delta_log" {
			codec, payload = "SNAPPY", "SNAPPY" // checkpoints, as Spark writes them
		} else {
			name := strings.TrimSuffix(filepath.Base(p), ".parquet")
			payload = payloadCodecs[name[strings.LastIndexByte(name, '.')+1:]]
		}
		out = append(out, parquetFile{p, codec, payload})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, err
}

// checkParquetFiles checks every Parquet file of a table with DuckDB's
// parquet_file_metadata and parquet_metadata: created_by parses as
// parquet-mr parses it, naming tidemark and wantVersion with a build;
// every column chunk has the codec of its kind of file and only PLAIN or
// dictionary encodings; its first data page is a v1 DATA_PAGE (read from
// the page header, which DuckDB does not show).
func checkParquetFiles(ctx context.Context, db *sql.DB, rep *interopReport, name, dir, wantVersion string) parquetFilesReport {
	var pr parquetFilesReport
	files, err := tableParquetFiles(dir)
	if err != nil {
		rep.fail(name, "list parquet files: %v", err)
		return pr
	}
	if len(files) == 0 {
		return pr
	}
	codec := map[string]string{}
	payload := map[string]string{}
	var paths []string
	for _, f := range files {
		codec[f.path], payload[f.path] = f.codec, f.payload
		paths = append(paths, f.path)
		if f.codec == "SNAPPY" {
			pr.Checkpoints++
		} else {
			pr.DataFiles++
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT file_name, coalesce(created_by, '') FROM parquet_file_metadata("+sqlList(paths)+")")
	if err != nil {
		rep.fail(name, "parquet_file_metadata: %v", err)
		return pr
	}
	seen := map[string]bool{}
	for rows.Next() {
		var f, createdBy string
		if err := rows.Scan(&f, &createdBy); err != nil {
			rep.fail(name, "parquet_file_metadata: %v", err)
			break
		}
		seen[f] = true
		if !slices.Contains(pr.CreatedBy, createdBy) {
			pr.CreatedBy = append(pr.CreatedBy, createdBy)
		}
		if msg := checkCreatedBy(createdBy, wantVersion); msg != "" {
			rep.fail(name, "%s: %s", relPath(dir, f), msg)
		}
	}
	if err := rows.Err(); err != nil {
		rep.fail(name, "parquet_file_metadata: %v", err)
	}
	rows.Close()
	for _, p := range paths {
		if !seen[p] {
			rep.fail(name, "%s: no file metadata from DuckDB", relPath(dir, p))
		}
	}

	rows, err = db.QueryContext(ctx, "SELECT file_name, path_in_schema, compression, encodings, data_page_offset FROM parquet_metadata("+sqlList(paths)+")")
	if err != nil {
		rep.fail(name, "parquet_metadata: %v", err)
		return pr
	}
	defer rows.Close()
	open := map[string]*os.File{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for rows.Next() {
		var f, col, comp, encs string
		var offset int64
		if err := rows.Scan(&f, &col, &comp, &encs, &offset); err != nil {
			rep.fail(name, "parquet_metadata: %v", err)
			return pr
		}
		pr.Chunks++
		rel := relPath(dir, f)
		want := codec[f]
		if col == "payload" {
			want = payload[f]
		}
		if comp != want {
			rep.fail(name, "%s: column %s is %s, want %s", rel, col, comp, want)
		}
		for _, e := range strings.Split(encs, ",") {
			if e = strings.TrimSpace(e); !valueEncodings[e] {
				rep.fail(name, "%s: column %s has encoding %s, want PLAIN or dictionary", rel, col, e)
			}
		}
		fh := open[f]
		if fh == nil {
			if fh, err = os.Open(f); err != nil {
				rep.fail(name, "%s: %v", rel, err)
				continue
			}
			open[f] = fh
		}
		if typ, err := pageType(fh, offset); err != nil {
			rep.fail(name, "%s: column %s: page header at %d: %v", rel, col, offset, err)
		} else if typ != 0 {
			rep.fail(name, "%s: column %s: first data page is %s, want DATA_PAGE (v1)", rel, col, pageTypeName(typ))
		}
	}
	if err := rows.Err(); err != nil {
		rep.fail(name, "parquet_metadata: %v", err)
	}
	return pr
}

// checkCreatedBy returns what is wrong with a created_by, "" if nothing.
func checkCreatedBy(s, wantVersion string) string {
	m := parquetMRVersion.FindStringSubmatch(s)
	switch {
	case m == nil || m[1] == "":
		return fmt.Sprintf("created_by %q: parquet-mr's VersionParser cannot parse it", s)
	case m[1] != "tidemark":
		return fmt.Sprintf("created_by %q: application %q, want tidemark", s, m[1])
	case !parquetMRSemver.MatchString(m[2]):
		return fmt.Sprintf("created_by %q: version %q is not a semantic version", s, m[2])
	case wantVersion != "" && m[2] != wantVersion:
		return fmt.Sprintf("created_by %q: version %q, want %q (tidemark --version)", s, m[2], wantVersion)
	case m[3] == "":
		return fmt.Sprintf("created_by %q: no build", s)
	}
	return ""
}

// pageType reads the type of the page whose header starts at offset: the
// header is a Thrift compact struct whose first field is 1, type i32
// (byte 0x15), followed by the zigzag varint of the PageType.
func pageType(f *os.File, offset int64) (int32, error) {
	var b [8]byte
	n, err := f.ReadAt(b[:], offset)
	if n < 2 {
		return 0, fmt.Errorf("short read: %v", err)
	}
	if b[0] != 0x15 {
		return 0, fmt.Errorf("not a page header (first byte %#x)", b[0])
	}
	var u uint64
	for i, shift := 1, 0; i < n; i, shift = i+1, shift+7 {
		u |= uint64(b[i]&0x7f) << shift
		if b[i] < 0x80 {
			return int32(u>>1) ^ -int32(u&1), nil
		}
	}
	return 0, fmt.Errorf("bad varint")
}

func pageTypeName(t int32) string {
	switch t {
	case 0:
		return "DATA_PAGE"
	case 1:
		return "INDEX_PAGE"
	case 2:
		return "DICTIONARY_PAGE"
	case 3:
		return "DATA_PAGE_V2"
	}
	return fmt.Sprintf("page type %d", t)
}
