package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README and docs/ document every command and every flag, so a flag
// added without documentation fails here.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	docs, _ := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		readme += string(b)
	}
	for _, cmd := range newApp().Commands {
		if !strings.Contains(readme, "tidemark "+cmd.Name) {
			t.Errorf("README does not mention `tidemark %s`", cmd.Name)
		}
		for _, f := range cmd.Flags {
			if name := f.Names()[0]; name != "help" && !strings.Contains(readme, "`--"+name) {
				t.Errorf("README does not document %s --%s", cmd.Name, name)
			}
		}
	}
	for _, f := range newApp().Flags {
		if name := f.Names()[0]; !strings.Contains(readme, "--"+name) {
			t.Errorf("README does not document the global --%s", name)
		}
	}
}
