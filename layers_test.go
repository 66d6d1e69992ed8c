package tidemark_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// allowed lists, for every package of the module, the project packages it may
// import (STYLE.md "Layers"). A package missing from this table fails the
// test, so a new package has to take a place in the diagram.
var allowed = map[string][]string{
	"tidemark":                          {},
	"tidemark/ingest":                   {"tidemark", "tidemark/lake/store"},
	"tidemark/lake/store":               {},
	"tidemark/lake/store/storetest":     {"tidemark/lake/store"},
	"tidemark/lake/colfile":             {},
	"tidemark/lake/colfile/colfiletest": {"tidemark/lake/colfile"},
	"tidemark/lake/delta":               {"tidemark", "tidemark/lake/store"},
	"tidemark/lake":                     {"tidemark", "tidemark/lake/store", "tidemark/lake/delta", "tidemark/lake/colfile"},
	"tidemark/stream/engine":            {"tidemark"},
	"tidemark/stream":                   {"tidemark", "tidemark/ingest", "tidemark/lake", "tidemark/lake/store", "tidemark/lake/delta", "tidemark/stream/engine"},
	"tidemark/batch":                    {"tidemark", "tidemark/lake", "tidemark/lake/store"},
	"tidemark/batch/lateness":           {"tidemark", "tidemark/batch", "tidemark/lake", "tidemark/lake/store"},
	"tidemark/reconcile":                {"tidemark", "tidemark/batch", "tidemark/lake", "tidemark/lake/store"},
	"tidemark/reconcile/requeue":        {"tidemark", "tidemark/ingest", "tidemark/lake", "tidemark/lake/store"},
	"tidemark/cmd/tidemark":             {"*"},
	"tidemark/scripts/gen":              {},
}

// testOnly are helper packages any test may import: they are test kits, not layers.
var testOnly = map[string]bool{"tidemark/lake/store/storetest": true, "tidemark/lake/colfile/colfiletest": true}

// leaves are the packages that import nothing of the project (STYLE.md:
// "leaf packages that import nothing of the project"), tests included but
// for their own test kits: the store interface and its backends, and the
// Parquet column writer.
var leaves = map[string][]string{
	"tidemark/lake/store":   {"tidemark/lake/store/storetest"},
	"tidemark/lake/colfile": {"tidemark/lake/colfile/colfiletest"},
}

// testWiring are extra edges allowed in tests only: tests that prove a
// contract between jobs wire them together, as cmd does (reconcile's
// "stream + reconcile == batch" property, the lateness what-if against the
// engine's real drops).
var testWiring = map[string][]string{
	"tidemark/reconcile":      {"tidemark/stream/engine"},
	"tidemark/batch/lateness": {"tidemark/stream/engine"},
	"tidemark/batch":          {"tidemark/stream/engine"}, // stream sessions + batch sessionization agree
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		seen[p.ImportPath] = true
		allow, ok := allowed[p.ImportPath]
		if !ok {
			t.Errorf("package %s has no place in the layer diagram (add it to allowed)", p.ImportPath)
			continue
		}
		check := func(imports []string, tests bool) {
			for _, imp := range imports {
				if imp != "tidemark" && !strings.HasPrefix(imp, "tidemark/") {
					continue
				}
				if imp == p.ImportPath || (tests && (testOnly[imp] || permits(testWiring[p.ImportPath], imp))) || permits(allow, imp) {
					continue
				}
				t.Errorf("%s imports %s: not allowed by the layer diagram (allowed: %v)", p.ImportPath, imp, allow)
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
		if kits, leaf := leaves[p.ImportPath]; leaf {
			for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
				if (imp == "tidemark" || strings.HasPrefix(imp, "tidemark/")) && imp != p.ImportPath && !slices.Contains(kits, imp) {
					t.Errorf("%s is a leaf package but imports %s", p.ImportPath, imp)
				}
			}
		}
	}
	for _, must := range []string{"tidemark", "tidemark/cmd/tidemark", "tidemark/stream", "tidemark/lake", "tidemark/lake/colfile", "tidemark/lake/store"} {
		if !seen[must] {
			t.Errorf("go list did not report %s: the check saw %d packages", must, len(seen))
		}
	}
}

func permits(allow []string, imp string) bool {
	for _, a := range allow {
		if a == "*" || a == imp {
			return true
		}
	}
	return false
}
