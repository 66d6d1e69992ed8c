package tidemark

import (
	"errors"
	"io/fs"
	"testing"
)

func TestConfigErrorPhrase(t *testing.T) {
	e := &ConfigError{Pkg: "p", Format: "{A.B} needs {C}, got %d", Args: []any{3}, Err: fs.ErrNotExist}
	if got, want := e.Error(), "p config: A.B needs C, got 3: file does not exist"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	flags := map[string]string{"A.B": "--a-b", "C": "--c%"}
	if got, want := e.Phrase(func(f string) string { return flags[f] }), "--a-b needs --c%, got 3: file does not exist"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(e, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", e)
	}
}
