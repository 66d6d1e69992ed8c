package tidemark

import (
	"regexp"
	"testing"
)

// parquet-mr's VersionParser.FORMAT and SemanticVersion's FORMAT
// (org.apache.parquet, parquet-common), as Go regexps. Java's
// Matcher.matches() needs the whole string to match, hence ^...$. Go's
// regexp picks the submatches a backtracking engine (Java's) would.
var (
	parquetMRVersion = regexp.MustCompile(`^(?:(.*?)\s+version\s*(?:([^(]*?)\s*(?:\(\s*build\s*([^)]*?)\s*\))?)?)$`)
	parquetMRSemver  = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)([^-+]*)?(?:-([^+]*))?(?:\+(.*))?$`)
)

// parseCreatedBy parses s as parquet-mr does: ok is false where
// VersionParser throws; semver false where ParsedVersion has no semantic
// version (parquet-mr then distrusts binary min/max for its own files).
func parseCreatedBy(s string) (app, version, build string, ok, semver bool) {
	m := parquetMRVersion.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return "", "", "", false, false
	}
	return m[1], m[2], m[3], true, parquetMRSemver.MatchString(m[2])
}

func TestParseCreatedByLikeParquetMR(t *testing.T) {
	for _, tc := range []struct {
		in, app, version, build string
		ok, semver              bool
	}{
		{"parquet-mr version 1.12.3 (build f8dced182c4c1fbdec6ccb3185537b5a01e6ed6b)", "parquet-mr", "1.12.3", "f8dced182c4c1fbdec6ccb3185537b5a01e6ed6b", true, true},
		{"parquet-mr version 1.8.0rc2-SNAPSHOT (build ddb469afac70404ea63b72ed2f07a911a8592ff7)", "parquet-mr", "1.8.0rc2-SNAPSHOT", "ddb469afac70404ea63b72ed2f07a911a8592ff7", true, true},
		{"parquet-rs version 54.2.1", "parquet-rs", "54.2.1", "", true, true},
		// What tidemark wrote before: parsed, but without a semantic version.
		{"tidemark version 0(build )", "tidemark", "0", "", true, false},
		{"tidemark version (build )", "tidemark", "", "", true, false},
		{"tidemark", "", "", "", false, false},
	} {
		app, version, build, ok, semver := parseCreatedBy(tc.in)
		if app != tc.app || version != tc.version || build != tc.build || ok != tc.ok || semver != tc.semver {
			t.Errorf("%q: got %q %q %q ok=%v semver=%v, want %q %q %q ok=%v semver=%v",
				tc.in, app, version, build, ok, semver, tc.app, tc.version, tc.build, tc.ok, tc.semver)
		}
	}
}

func TestCreatedByParsesInParquetMR(t *testing.T) {
	for _, tc := range []struct{ version, build, wantBuild string }{
		{Version, Build(), Build()},
		{"0.1.0-dev", "", "unknown"},
		{"1.4.2", "0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"},
		{"1.4.2", "0123456789abcdef-dirty", "0123456789abcdef-dirty"},
		{"2.0.0-rc.1+meta", "x (y)", "x--y-"},
	} {
		s := createdBy(tc.version, tc.build)
		app, version, build, ok, semver := parseCreatedBy(s)
		if tc.wantBuild == "" {
			tc.wantBuild = "unknown"
		}
		if !ok || !semver || app != "tidemark" || version != tc.version || build != tc.wantBuild {
			t.Errorf("created_by %q: parquet-mr reads app %q version %q (semver %v) build %q (ok %v), want tidemark %q %q",
				s, app, version, semver, build, ok, tc.version, tc.wantBuild)
		}
	}
	if got, want := CreatedBy(), createdBy(Version, Build()); got != want {
		t.Errorf("CreatedBy() = %q, want %q", got, want)
	}
}
