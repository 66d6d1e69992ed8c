package tidemark

import (
	"slices"
	"strings"
	"testing"
)

func TestParseField(t *testing.T) {
	for _, tc := range []struct {
		spec string
		name string
		path []string
		err  string
	}{
		{"status", "status", []string{"status"}, ""},
		{"request.path", "path", []string{"request", "path"}, ""},
		{"http.request.method", "method", []string{"http", "request", "method"}, ""},
		{"route=request.path", "route", []string{"request", "path"}, ""},
		{"`a.b`", "a.b", []string{"a.b"}, ""},
		{"x.`a.b`.c", "c", []string{"x", "a.b", "c"}, ""},
		{"`a``b`", "a`b", []string{"a`b"}, ""},
		{"n=`a=b`", "n", []string{"a=b"}, ""},
		{"`a=b`", "a=b", []string{"a=b"}, ""},
		{"Région", "Région", []string{"Région"}, ""},
		{"", "", nil, "empty field path"},
		{"a.", "", nil, "ends with a dot"},
		{".a", "", nil, "empty name"},
		{"a..b", "", nil, "empty name"},
		{"`a", "", nil, "unclosed backtick"},
		{"`a`b", "", nil, "a dot must follow"},
		{"a`b", "", nil, "backtick inside a bare name"},
		{"=a", "", nil, "empty column name"},
		{"n=", "", nil, "empty field path"},
	} {
		f, err := ParseField(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, %v; want an error with %q", tc.spec, f, err, tc.err)
			}
			continue
		}
		if err != nil || f.Name != tc.name || !slices.Equal(f.Path, tc.path) {
			t.Errorf("%q: got %q %q %v, want %q %q", tc.spec, f.Name, f.Path, err, tc.name, tc.path)
		}
	}
}

func TestParseKeysSameColumn(t *testing.T) {
	if _, err := ParseKeys([]string{"request.path", "url.path"}); err == nil || !strings.Contains(err.Error(), `--key "request.path" and --key "url.path" both make the column "path"`) || !strings.Contains(err.Error(), `--key "name=url.path"`) {
		t.Errorf("got %v", err)
	}
	if _, err := ParseKeys([]string{"Path", "p=path"}); err != nil {
		t.Errorf("named apart: %v", err)
	}
	if _, err := ParseKeys([]string{"page", "page"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("got %v", err)
	}
}

// FuzzParseField: whatever parses renders (String) as a spec that parses
// back to the same field, and no segment is empty.
func FuzzParseField(f *testing.F) {
	for _, s := range []string{"a", "a.b", "n=a.b", "`a.b`", "x.`a``b`.c", "`a=b`", "a=", "``", "`.`.`.`", "a:int"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fd, err := ParseField(spec)
		if err != nil {
			return
		}
		if fd.Name == "" || len(fd.Path) == 0 || slices.Contains(fd.Path, "") {
			t.Fatalf("%q: parsed to %q %q", spec, fd.Name, fd.Path)
		}
		again, err := ParseField(fd.String())
		if err != nil || again.Name != fd.Name || !slices.Equal(again.Path, fd.Path) {
			t.Fatalf("%q -> %q -> %q %q %v", spec, fd.String(), again.Name, again.Path, err)
		}
	})
}
