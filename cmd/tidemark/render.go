package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"tidemark"
)

// cell is one rendered value; null cells print as empty (CSV), "∅" (table)
// or null (JSON), and num cells are JSON numbers or booleans, not strings.
type cell struct {
	s    string
	num  bool
	null bool
}

func strCell(s string) cell  { return cell{s: s} }
func numCell(s string) cell  { return cell{s: s, num: true} }
func nullCell() cell         { return cell{null: true} }
func timeCell(us int64) cell { return cell{s: tidemark.FormatTime(us)} }

// table renders the cell for the table format: null as ∅.
func (c cell) table() string {
	if c.null {
		return "∅"
	}
	return c.s
}

// renderer collects rows and writes them as a table, CSV or JSON lines.
type renderer struct {
	format string
	cols   []string
	rows   [][]cell
}

func newRenderer(format string) (*renderer, error) {
	switch format {
	case "table", "csv", "json":
		return &renderer{format: format}, nil
	}
	return nil, fmt.Errorf("--format %q: want table, csv or json", format)
}

func (r *renderer) header(cols []string) { r.cols = cols }
func (r *renderer) row(cells []cell)     { r.rows = append(r.rows, cells) }

func (r *renderer) flush(w io.Writer) error {
	switch r.format {
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(r.cols)
		for _, row := range r.rows {
			rec := make([]string, len(row))
			for i, c := range row {
				rec[i] = c.s
			}
			cw.Write(rec)
		}
		cw.Flush()
		return cw.Error()
	case "json":
		for _, row := range r.rows {
			var b strings.Builder
			b.WriteByte('{')
			for i, c := range row {
				if i > 0 {
					b.WriteByte(',')
				}
				name, _ := json.Marshal(r.cols[i])
				b.Write(name)
				b.WriteByte(':')
				switch {
				case c.null:
					b.WriteString("null")
				case c.num:
					b.WriteString(c.s)
				default:
					v, _ := json.Marshal(c.s)
					b.Write(v)
				}
			}
			b.WriteString("}\n")
			if _, err := io.WriteString(w, b.String()); err != nil {
				return err
			}
		}
		return nil
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(r.cols, "\t"))
		for _, row := range r.rows {
			vals := make([]string, len(row))
			for i, c := range row {
				vals[i] = c.table()
			}
			fmt.Fprintln(tw, strings.Join(vals, "\t"))
		}
		if len(r.rows) == 0 {
			fmt.Fprintln(tw, "(no rows)")
		}
		return tw.Flush()
	}
}
