package main

import (
	"strings"
	"testing"
)

// Every command answers --help, and the binary answers --version.
func TestHelpAndVersion(t *testing.T) {
	out, stderr, code := run(t, "--version")
	if code != 0 || !strings.Contains(out, "tidemark version ") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, cmd := range newApp().Commands {
		t.Run(cmd.Name, func(t *testing.T) {
			out, stderr, code := run(t, cmd.Name, "--help")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(out, "tidemark "+cmd.Name) || !strings.Contains(out, "OPTIONS") {
				t.Errorf("help of %s does not look like help:\n%s", cmd.Name, out)
			}
			for _, f := range cmd.Flags {
				if !strings.Contains(out, "--"+f.Names()[0]) {
					t.Errorf("help of %s lacks --%s", cmd.Name, f.Names()[0])
				}
			}
		})
	}
}
