package tidemark

import (
	"errors"
	"fmt"
	"strings"
)

// Field is one input field a key reads: the Path to it (nested objects,
// outermost first) and the Name of the column it becomes.
//
// A field spec (--key, and the path of --value, --time-field and
// --arrival-field) is [name=]path: path segments joined by dots, each
// segment bare or in backticks (a literal dot or backtick inside: `a.b`,
// a doubled backtick for one), so request.path reads {"request":{"path":...}}
// and `a.b` the top-level field named a.b. The column is named after the
// last segment unless name= names it, as Spark and DuckDB name the column
// of SELECT request.path.
type Field struct {
	Name string
	Path []string
}

// ParseField parses a key's field spec [name=]path.
func ParseField(spec string) (Field, error) {
	name, rest, named := cutUnquoted(spec, '=')
	path, err := ParsePath(rest)
	if err != nil {
		return Field{}, fmt.Errorf("field %q: %w", spec, err)
	}
	f := Field{Name: path[len(path)-1], Path: path}
	if named {
		if name == "" {
			return Field{}, fmt.Errorf("field %q: empty column name before '='", spec)
		}
		f.Name = name
	}
	return f, nil
}

// ParsePath parses a field path: dot-separated segments, each bare or in
// backticks. A path has at least one segment and no empty one.
func ParsePath(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty field path")
	}
	var path []string
	var seg strings.Builder
	for i := 0; ; {
		seg.Reset()
		if i < len(s) && s[i] == '`' {
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '`' {
					if i+1 < len(s) && s[i+1] == '`' {
						seg.WriteByte('`')
						i++
						continue
					}
					closed = true
					i++
					break
				}
				seg.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unclosed backtick in field path %q", s)
			}
			if i < len(s) && s[i] != '.' {
				return nil, fmt.Errorf("field path %q: a dot must follow a backticked name", s)
			}
		} else {
			for ; i < len(s) && s[i] != '.'; i++ {
				if s[i] == '`' {
					return nil, fmt.Errorf("field path %q: a backtick inside a bare name (quote the whole name: `a``b`)", s)
				}
				seg.WriteByte(s[i])
			}
		}
		if seg.Len() == 0 {
			return nil, fmt.Errorf("empty name in field path %q (a literal dot goes in backticks: `a.b`)", s)
		}
		path = append(path, seg.String())
		if i >= len(s) {
			return path, nil
		}
		i++ // the dot
		if i >= len(s) {
			return nil, fmt.Errorf("field path %q ends with a dot", s)
		}
	}
}

// cutUnquoted cuts s around the first sep outside backticks.
func cutUnquoted(s string, sep byte) (before, after string, found bool) {
	in := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '`':
			in = !in
		case s[i] == sep && !in:
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// FormatPath renders a path as ParsePath reads it: segments holding a dot
// or a backtick, or that would read as a name (=), in backticks.
func FormatPath(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		if p == "" || strings.ContainsAny(p, ".`=") {
			p = "`" + strings.ReplaceAll(p, "`", "``") + "`"
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// String renders the field as a spec ParseField reads back: name= only
// when the name is not the last segment.
func (f Field) String() string {
	p := FormatPath(f.Path)
	if len(f.Path) > 0 && f.Name == f.Path[len(f.Path)-1] {
		return p
	}
	return f.Name + "=" + p
}

// Dotted returns the path's segments joined by dots: the header name a CSV
// file gives the field (CSV has no nesting, a dotted header is literal).
func (f Field) Dotted() string { return strings.Join(f.Path, ".") }

// ParseKeys parses key specs and refuses two keys that make one column
// (same name ignoring case, as Spark and DuckDB match column names).
func ParseKeys(specs []string) ([]Field, error) {
	out := make([]Field, 0, len(specs))
	seen := map[string]string{}
	for _, s := range specs {
		f, err := ParseField(s)
		if err != nil {
			return nil, fmt.Errorf("--key %s", err)
		}
		low := strings.ToLower(f.Name)
		if prev, ok := seen[low]; ok {
			if prev == s {
				return nil, fmt.Errorf("--key %q given twice", s)
			}
			return nil, fmt.Errorf("--key %q and --key %q both make the column %q (Spark and DuckDB match column names ignoring case); name one of them: --key %q", prev, s, f.Name, "name="+s)
		}
		seen[low] = s
		out = append(out, f)
	}
	return out, nil
}
