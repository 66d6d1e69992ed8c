package delta

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Which table features tidemark accepts. A table that another engine
// upgraded keeps working where tidemark can honour the feature, and only
// the table that has it is affected (each table's protocol is checked when
// that table is read or written, never at lake level).
//
// Reading (minReaderVersion 3): timestampNtz (tidemark reads only its own
// columns, none of them TIMESTAMP_NTZ), typeWidening (files with a
// narrower type read widened, or fail naming the column), and
// vacuumProtocolCheck (tidemark's vacuum checks the writer protocol
// first: see Snapshot.Writable). Anything else (deletionVectors, columnMapping,
// v2Checkpoint, ...) is refused: reading around it would give wrong rows.
//
// Writing: legacy writer versions up to 3 (appendOnly, invariants, CHECK
// constraints), 4 when neither change data feed nor generated columns are
// in use; writer version 7 with only the features named in
// writableFeatures. appendOnly is honoured (no removes); invariants and
// CHECK constraints refuse data writes (see CheckConstraints).
var (
	readableFeatures = []string{"timestampNtz", "typeWidening", "typeWidening-preview", "vacuumProtocolCheck"}
	writableFeatures = []string{"appendOnly", "invariants", "checkConstraints", "timestampNtz", "typeWidening",
		"typeWidening-preview", "vacuumProtocolCheck", "domainMetadata", "changeDataFeed", "generatedColumns"}
)

// ErrConstraint is returned by Commit for a data write to a table with
// invariants or CHECK constraints, which tidemark does not evaluate.
var ErrConstraint = &sentinel{msg: "delta: table constraints not evaluated"}

// checkReadable refuses protocols and metadata this reader cannot honour.
func checkReadable(p Protocol, m *Metadata) error {
	if m != nil {
		if mode := m.Configuration["delta.columnMapping.mode"]; mode != "" && mode != "none" {
			return fmt.Errorf("%w: column mapping (mode %q, minReaderVersion %d)", ErrUnsupported, mode, p.MinReaderVersion)
		}
	}
	var unknown []string
	for _, f := range p.ReaderFeatures {
		if !slices.Contains(readableFeatures, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: reader features %v (minReaderVersion %d)", ErrUnsupported, unknown, p.MinReaderVersion)
	}
	switch p.MinReaderVersion {
	case 0, 1, 3:
		return nil
	case 2:
		return fmt.Errorf("%w: minReaderVersion 2 (column mapping)", ErrUnsupported)
	default:
		return fmt.Errorf("%w: minReaderVersion %d", ErrUnsupported, p.MinReaderVersion)
	}
}

// checkWritable refuses to write tables whose writer protocol asks for
// features this writer does not implement (m, when known, tells whether a
// feature is in use).
func checkWritable(p Protocol, m *Metadata) error {
	cdf := m != nil && strings.EqualFold(m.Configuration["delta.enableChangeDataFeed"], "true")
	generated := m != nil && hasGenerated(m.SchemaString)
	inUse := func(feature string) error {
		switch {
		case feature == "changeDataFeed" && cdf:
			return fmt.Errorf("%w: change data feed is enabled (delta.enableChangeDataFeed): tidemark does not write change data files", ErrUnsupported)
		case feature == "generatedColumns" && generated:
			return fmt.Errorf("%w: generated columns: tidemark does not compute them", ErrUnsupported)
		}
		return nil
	}
	switch {
	case p.MinWriterVersion <= 3:
		return nil
	case p.MinWriterVersion == 4:
		return errors.Join(inUse("changeDataFeed"), inUse("generatedColumns"))
	case p.MinWriterVersion == 7:
		var unknown []string
		for _, f := range p.WriterFeatures {
			if !slices.Contains(writableFeatures, f) {
				unknown = append(unknown, f)
			} else if err := inUse(f); err != nil {
				return err
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("%w: writer features %v (minWriterVersion 7)", ErrUnsupported, unknown)
		}
		return nil
	default:
		return fmt.Errorf("%w: minWriterVersion %d (writer features %v)", ErrUnsupported, p.MinWriterVersion, p.WriterFeatures)
	}
}

// hasGenerated reports whether a schema has a generated column.
func hasGenerated(schema string) bool {
	return strings.Contains(schema, "delta.generationExpression")
}

// Constraint is one invariant or CHECK constraint of a table.
type Constraint struct {
	Name       string // "delta.constraints.<name>", or "invariant on <column>"
	Expression string
}

// Constraints lists a table's CHECK constraints (delta.constraints.* in
// its configuration) and column invariants (delta.invariants in the
// schema's field metadata), sorted by name.
func Constraints(m *Metadata) []Constraint {
	var out []Constraint
	for k, v := range m.Configuration {
		if name, ok := strings.CutPrefix(k, "delta.constraints."); ok {
			out = append(out, Constraint{Name: "CHECK constraint " + name, Expression: v})
		}
	}
	if schema, err := ParseSchema(m.SchemaString); err == nil {
		var walk func(prefix string, s *StructType)
		walk = func(prefix string, s *StructType) {
			for _, f := range s.Fields {
				if inv, ok := f.Metadata["delta.invariants"]; ok {
					out = append(out, Constraint{Name: "invariant on " + prefix + f.Name, Expression: invariantExpr(inv)})
				}
				if f.Type.Struct != nil {
					walk(prefix+f.Name+".", f.Type.Struct)
				}
			}
		}
		walk("", schema)
	}
	slices.SortFunc(out, func(a, b Constraint) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// invariantExpr extracts the SQL of a delta.invariants value
// ({"expression":{"expression":"x > 3"}}, as a JSON string).
func invariantExpr(v any) string {
	s, _ := v.(string)
	var doc struct {
		Expression struct {
			Expression string `json:"expression"`
		} `json:"expression"`
	}
	if json.Unmarshal([]byte(s), &doc) == nil && doc.Expression.Expression != "" {
		return doc.Expression.Expression
	}
	return fmt.Sprint(v)
}

// checkConstraints refuses a transaction that writes data (an add with
// dataChange) to a table with constraints: tidemark cannot evaluate SQL
// expressions, and writing unchecked rows would break them silently.
// Commits that add no new rows (compaction, txn records, removes) are fine.
func checkConstraints(m *Metadata, tx *Transaction) error {
	if m == nil {
		return nil
	}
	writes := slices.ContainsFunc(tx.Actions, func(a Action) bool { return a.Add != nil && a.Add.DataChange })
	if !writes {
		return nil
	}
	cs := Constraints(m)
	if len(cs) == 0 {
		return nil
	}
	var names []string
	for _, c := range cs {
		names = append(names, fmt.Sprintf("%s (%s)", c.Name, c.Expression))
	}
	return fmt.Errorf("%w: the table has %s; tidemark does not evaluate constraints, so it refuses to write rows that might break them (drop them with ALTER TABLE ... DROP CONSTRAINT, or write this table with an engine that checks them)",
		ErrConstraint, strings.Join(names, ", "))
}

// Writable reports whether this package may write the table at this
// snapshot (its writer protocol and the features in use); vacuum asks it
// before deleting anything, as vacuumProtocolCheck requires.
func (s *Snapshot) Writable() error { return checkWritable(s.Protocol, &s.Metadata) }
