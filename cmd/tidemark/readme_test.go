package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/urfave/cli/v2"
)

// checkedDocs are the documents whose shell examples must run against the
// command tree: the README and the docs/ pages the README is the landing
// page of. Every flag and command in full is in docs/cli.md, which
// TestCLIReference keeps generated.
var checkedDocs = []string{
	"README.md",
	"docs/concepts.md",
	"docs/operations.md",
	"docs/lake-format.md",
	"docs/performance.md",
	"docs/development.md",
	"docs/file-identity.md",
	"docs/files-operations.md",
	"docs/monitoring.md",
	"docs/log-shapes.md",
	"docs/mistakes-and-requeue.md",
	"docs/lake-health.md",
}

// The README lists every command, so a command added without a word on
// the landing page fails here.
func TestREADMENamesEveryCommand(t *testing.T) {
	readme := readDoc(t, "README.md")
	for _, cmd := range newApp().Commands {
		if !strings.Contains(readme, "`tidemark "+cmd.Name+"`") {
			t.Errorf("README does not name `tidemark %s`", cmd.Name)
		}
	}
}

// Every tidemark command line in a shell or cron block of the checked docs
// names a real command and only flags that command (or the app) has, so an
// example cannot go stale when a flag is renamed or removed.
func TestDocExamplesUseRealFlags(t *testing.T) {
	app := newApp()
	global := flagNames(app.Flags)
	global["help"], global["version"] = true, true
	commands := map[string]map[string]bool{}
	for _, cmd := range app.Commands {
		commands[cmd.Name] = flagNames(cmd.Flags)
	}
	seen := 0
	for _, doc := range checkedDocs {
		for _, line := range shellLines(readDoc(t, doc)) {
			for _, inv := range invocations(line) {
				seen++
				cmdName, flags := inv[0], inv[1:]
				own, ok := commands[cmdName]
				if !ok {
					t.Errorf("%s: %q: no command %q", doc, line, cmdName)
					continue
				}
				for _, f := range flags {
					if !own[f] && !global[f] {
						t.Errorf("%s: %q: tidemark %s has no --%s", doc, line, cmdName, f)
					}
				}
			}
		}
	}
	if seen < 10 {
		t.Errorf("found only %d tidemark command lines in the docs; the parser is broken", seen)
	}
}

// Every relative link of the README and docs/ resolves to a file, and a
// link with a #fragment to a heading of the Markdown file it names.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range docs {
		rel, _ := filepath.Rel(root, doc)
		text := readDoc(t, rel)
		for _, m := range link.FindAllStringSubmatch(stripCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			want, _ := filepath.Rel(root, path)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %s does not exist", rel, target, want)
				continue
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !slices.Contains(anchors(readDoc(t, want)), frag) {
				t.Errorf("%s: link %s: %s has no heading #%s", rel, target, want, frag)
			}
		}
	}
}

// The generated CLI reference, the landing page and the pages it promises
// are all there.
func TestDocsExist(t *testing.T) {
	for _, doc := range append(checkedDocs, cliReferencePath, "docs/performance-history.md") {
		readDoc(t, doc)
	}
	if n := strings.Count(readDoc(t, "README.md"), "\n"); n > 300 {
		t.Errorf("README.md has %d lines; keep the landing page under 300 and move detail to docs/", n)
	}
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func flagNames(flags []cli.Flag) map[string]bool {
	m := map[string]bool{"help": true}
	for _, f := range flags {
		for _, n := range f.Names() {
			m[n] = true
		}
	}
	return m
}

// shellLines returns the lines of the ```sh and ```cron blocks of a
// Markdown text, continuations joined and comments dropped.
func shellLines(md string) []string {
	var out []string
	in := false
	cur := ""
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			in = trimmed == "```sh" || trimmed == "```cron"
			continue
		}
		if !in || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasSuffix(strings.TrimSpace(line), `\`) {
			cur += strings.TrimSuffix(strings.TrimSpace(line), `\`) + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// invocations finds the tidemark command lines in a shell line: for each,
// the command's name followed by the long flags given (global ones too).
// `tidemark`, `./tidemark` and `go run ./cmd/tidemark` start one;
// `go build -o tidemark ./cmd/tidemark` does not.
func invocations(line string) [][]string {
	fields := strings.Fields(line)
	var out [][]string
	for i := 0; i < len(fields); i++ {
		f, prev := fields[i], ""
		if i > 0 {
			prev = fields[i-1]
		}
		start := (f == "tidemark" || f == "./tidemark") && prev != "-o"
		start = start || (f == "./cmd/tidemark" && prev == "run")
		if !start {
			continue
		}
		var inv, flags []string
		first := "" // the first plain word, for the error when no command is named
		for i++; i < len(fields); i++ {
			g := fields[i]
			if g == "&&" || g == "|" || g == ";" || strings.HasPrefix(g, ">") || strings.HasPrefix(g, "2>") {
				break
			}
			if name, ok := strings.CutPrefix(g, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				flags = append(flags, name)
				continue
			}
			if inv == nil && isCommandName(g) {
				inv = []string{g}
			} else if first == "" && isWord(g) {
				first = g
			}
		}
		if inv == nil && first != "" {
			inv = []string{first} // no command: reported as unknown
		}
		if inv != nil {
			out = append(out, append(inv, flags...))
		}
		i--
	}
	return out
}

// isCommandName says whether w names a command of the app.
func isCommandName(w string) bool {
	for _, c := range newApp().Commands {
		if c.Name == w {
			return true
		}
	}
	return false
}

func isWord(s string) bool {
	for _, r := range s {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return s != ""
}

// stripCode drops fenced code blocks and inline code, where ](...) is not
// a link.
func stripCode(md string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if in {
			continue
		}
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			b.WriteString(parts[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// anchors lists the fragment ids GitHub gives the headings of a Markdown
// text: lower case, punctuation dropped, spaces as hyphens, repeats
// numbered.
func anchors(md string) []string {
	var out []string
	seen := map[string]int{}
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if in || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out = append(out, id+"-"+string(rune('0'+n)))
		} else {
			out = append(out, id)
		}
		seen[id]++
	}
	return out
}
