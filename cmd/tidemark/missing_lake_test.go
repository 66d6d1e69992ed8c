package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Commands that work on an existing lake say so when it is not there, and
// do not create an empty directory in its place.
func TestMissingLake(t *testing.T) {
	for _, cmd := range []string{"windows", "tables", "recompute", "compact", "vacuum", "reconcile", "lateness"} {
		t.Run(cmd, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "no-lake-here")
			_, stderr, code := run(t, cmd, "--lake", missing)
			if code == 0 || !strings.Contains(stderr, "open lake "+missing) || len(lines(stderr)) != 1 {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if _, err := os.Stat(missing); err == nil {
				t.Errorf("%s created %s", cmd, missing)
			}
		})
	}
}
