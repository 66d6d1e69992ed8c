package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// cliReferencePath is the generated CLI reference, relative to the
// repository root.
const cliReferencePath = "docs/cli.md"

// TestCLIReference keeps docs/cli.md equal to what the command tree says:
// a flag or command added, removed or reworded without regenerating the
// reference fails here. Regenerate with
//
//	go test ./cmd/tidemark -run TestCLIReference -update
func TestCLIReference(t *testing.T) {
	path := filepath.Join(repoRoot(t), cliReferencePath)
	want := cliReference(newApp())
	if *updateGolden {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./cmd/tidemark -run TestCLIReference -update)", err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s is stale from line %d:\n got  %q\n want %q\nregenerate it: go test ./cmd/tidemark -run TestCLIReference -update", cliReferencePath, i+1, g, w)
			}
		}
	}
}

// The reference names every command and every flag of each, so a command
// or flag the generator skipped would fail here even if the golden matched.
func TestCLIReferenceComplete(t *testing.T) {
	app := newApp()
	ref := cliReference(app)
	for _, f := range app.Flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue // hidden (kept for old command lines), as flagTable skips it
		}
		if !strings.Contains(ref, "`--"+f.Names()[0]+"`") {
			t.Errorf("reference lacks the global --%s", f.Names()[0])
		}
	}
	for _, cmd := range app.Commands {
		section := ref[strings.Index(ref, "\n## `tidemark "+cmd.Name+"`"):]
		if i := strings.Index(section[1:], "\n## "); i >= 0 {
			section = section[:i+1]
		}
		for _, f := range cmd.Flags {
			if n := f.Names()[0]; n != "help" && !strings.Contains(section, "`--"+n+"`") {
				t.Errorf("reference of %s lacks --%s", cmd.Name, n)
			}
		}
	}
}

// cliReference renders the command tree as Markdown: the global flags, then
// per command its usage, description and a table of its flags with their
// default and environment variable.
func cliReference(app *cli.App) string {
	var b strings.Builder
	b.WriteString("# tidemark command-line reference\n\n")
	b.WriteString("<!-- Generated from the command tree in cmd/tidemark by\n" +
		"     go test ./cmd/tidemark -run TestCLIReference -update\n" +
		"     Do not edit: TestCLIReference fails when this file and the flags differ. -->\n\n")
	fmt.Fprintf(&b, "`tidemark [global options] <command> [options]`: %s.\n\n", app.Usage)
	b.WriteString("Every flag can also be set from the environment variable in its row; a flag with no\n" +
		"default shown is off or empty unless its usage says otherwise. Errors are one line on\n" +
		"stderr and a non-zero exit status. `tidemark <command> --help` prints the same.\n\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	for _, cmd := range app.Commands {
		fmt.Fprintf(&b, "| [`%s`](#tidemark-%s) | %s |\n", cmd.Name, cmd.Name, mdCell(cmd.Usage))
	}
	b.WriteString("\n## Global options\n\n")
	b.WriteString("Given before the command: `tidemark --cpuprofile cpu.pprof stream ...`.\n\n")
	flagTable(&b, app.Flags)
	b.WriteString("| `--version`, `-v` | | | print the version |\n")
	for _, cmd := range app.Commands {
		fmt.Fprintf(&b, "\n## `tidemark %s`\n\n%s.\n\n", cmd.Name, cmd.Usage)
		if cmd.Description != "" {
			b.WriteString("```\n" + strings.TrimRight(cmd.Description, "\n") + "\n```\n\n")
		}
		flagTable(&b, cmd.Flags)
	}
	return b.String()
}

// flagTable writes one row per flag: names, default, environment, usage.
func flagTable(b *strings.Builder, flags []cli.Flag) {
	b.WriteString("| flag | default | environment | usage |\n|---|---|---|---|\n")
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		var names []string
		for _, n := range f.Names() {
			if len(n) == 1 {
				names = append(names, "`-"+n+"`")
			} else {
				names = append(names, "`--"+n+"`")
			}
		}
		var def, usage string
		var envs []string
		if d, ok := f.(cli.DocGenerationFlag); ok {
			usage = d.GetUsage()
			if d.TakesValue() {
				def = d.GetDefaultText()
			}
			for _, e := range d.GetEnvVars() {
				envs = append(envs, "`"+e+"`")
			}
		}
		if u, err := strconv.Unquote(def); err == nil {
			def = u
		}
		if def != "" {
			def = "`" + def + "`"
		}
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			def = "(required)"
		}
		if s, ok := f.(cli.DocGenerationSliceFlag); ok && s.IsSliceFlag() && !strings.Contains(usage, "repeatable") {
			usage += " (repeatable)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", strings.Join(names, ", "), def, strings.Join(envs, ", "), mdCell(usage))
	}
}

// mdCell makes text safe inside a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
