package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// coverage checks raw_events and quarantine payloads against the input
// files, and that every input line is in exactly one of them.
type coverage struct {
	input string
	data  map[string][]byte          // resolved input path -> contents
	seen  map[string]map[int64]uint8 // resolved input path -> line offset -> times seen
	where map[string]string          // lake "file" value -> resolved input path
}

func newCoverage(input string) *coverage {
	return &coverage{input: input, data: map[string][]byte{}, seen: map[string]map[int64]uint8{}, where: map[string]string{}}
}

// resolve maps a raw_events/quarantine "file" value (a path, or a key
// within the source) to an input file.
func (c *coverage) resolve(file, source string) (string, error) {
	if p, ok := c.where[source+"\x00"+file]; ok {
		return p, nil
	}
	cands := []string{file, filepath.Join(c.input, file)}
	if source != "" {
		cands = append(cands, filepath.Join(c.input, filepath.Base(source), file))
	}
	cands = append(cands, filepath.Join(c.input, filepath.Base(file)))
	for _, p := range cands {
		if !filepath.IsAbs(p) && p == file {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if _, ok := c.data[abs]; ok {
			c.where[source+"\x00"+file] = abs
			return abs, nil
		}
		if b, err := os.ReadFile(abs); err == nil {
			c.data[abs] = b
			c.where[source+"\x00"+file] = abs
			return abs, nil
		}
	}
	return "", fmt.Errorf("input file %q (source %q) not found under %s", file, source, c.input)
}

func (c *coverage) checkPayloads(ctx context.Context, db *sql.DB, rep *interopReport, tr *tableReport, name string, paths []string) {
	cols, err := describe(ctx, db, paths[0])
	if err != nil {
		rep.fail(name, "payloads: %v", err)
		return
	}
	types := map[string]string{}
	for _, col := range cols {
		types[col.name] = col.typ
	}
	for _, need := range []string{"file", "offset", "payload"} {
		if types[need] == "" {
			rep.fail(name, "payloads: no %q column", need)
			return
		}
	}
	payload := `"payload"`
	if types["payload"] == "VARCHAR" {
		payload = `encode("payload")` // UTF-8 bytes; a cast to BLOB would read \x escapes
	}
	source := "''"
	if types["source"] != "" {
		source = `coalesce("source", '')`
	}
	q := fmt.Sprintf(`SELECT "file", "offset", %s, %s FROM read_parquet(%s, hive_partitioning=false, union_by_name=true)`, source, payload, sqlList(paths))
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		rep.fail(name, "payloads: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var file, src string
		var off int64
		var pl []byte
		if err := rows.Scan(&file, &off, &src, &pl); err != nil {
			rep.fail(name, "payloads: %v", err)
			return
		}
		p, err := c.resolve(file, src)
		if err != nil {
			rep.fail(name, "payload at %s:%d: %v", file, off, err)
			continue
		}
		data := c.data[p]
		end := off + int64(len(pl))
		switch {
		case off < 0 || end > int64(len(data)):
			rep.fail(name, "payload at %s:%d: %d bytes run past the file's %d", file, off, len(pl), len(data))
			continue
		case !bytes.Equal(data[off:end], pl):
			rep.fail(name, "payload at %s:%d differs from the input: %q vs %q", file, off, clip(pl), clip(data[off:end]))
			continue
		case end < int64(len(data)) && data[end] != '\n' && !(data[end] == '\r' && end+1 < int64(len(data)) && data[end+1] == '\n'):
			rep.fail(name, "payload at %s:%d is not a whole line", file, off)
			continue
		}
		if c.seen[p] == nil {
			c.seen[p] = map[int64]uint8{}
		}
		if c.seen[p][off] < 255 {
			c.seen[p][off]++
		}
		tr.PayloadRows++
	}
	if err := rows.Err(); err != nil {
		rep.fail(name, "payloads: %v", err)
	}
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// finish checks every line of every input file was seen exactly once. A
// CSV file's header line is not a record.
func (c *coverage) finish(rep *interopReport) {
	var files []string
	_ = filepath.WalkDir(c.input, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			rep.fail("input", "%v", err)
			return nil
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".zst") {
			rep.warn("input", "%s: compressed input is not checked", p)
			return nil
		}
		abs, _ := filepath.Abs(p)
		files = append(files, abs)
		return nil
	})
	sort.Strings(files)
	for _, p := range files {
		data, ok := c.data[p]
		if !ok {
			b, err := os.ReadFile(p)
			if err != nil {
				rep.fail("input", "%v", err)
				continue
			}
			data = b
		}
		seen := c.seen[p]
		first := true
		for off := int64(0); off < int64(len(data)); {
			nl := bytes.IndexByte(data[off:], '\n')
			next := int64(len(data))
			if nl >= 0 {
				next = off + int64(nl) + 1
			}
			header := first && strings.HasSuffix(p, ".csv")
			first = false
			if !header {
				rep.InputLines++
				switch n := seen[off]; n {
				case 1:
					rep.CoveredLines++
				case 0:
					rep.fail("input", "%s:%d: line not in raw_events or quarantine: %q", relPath(c.input, p), off, clip(data[off:next]))
				default:
					rep.fail("input", "%s:%d: line is in the lake %d times", relPath(c.input, p), off, n)
				}
			}
			off = next
		}
	}
}
