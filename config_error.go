package tidemark

import (
	"fmt"
	"strings"
)

// ConfigError is a package's Config that its Validate refuses. Its text
// names the config's settings by field path in braces ("{Engine.Lateness}
// must not be negative"): Error writes the field paths, and Phrase lets a
// caller name them its own way (cmd/tidemark writes its flags), so no
// package below cmd speaks of flags.
type ConfigError struct {
	Pkg    string // the refusing package, e.g. "stream": Error's prefix
	Format string // fmt format with {Field} placeholders
	Args   []any
	Err    error // wrapped, when set
}

// ConfigErrorf is a ConfigError of package pkg.
func ConfigErrorf(pkg, format string, args ...any) *ConfigError {
	return &ConfigError{Pkg: pkg, Format: format, Args: args}
}

// Error is the message with each field named by its path in the config.
func (e *ConfigError) Error() string {
	return e.Pkg + " config: " + e.Phrase(func(field string) string { return field })
}

// Phrase is the message with each field named name(field).
func (e *ConfigError) Phrase(name func(field string) string) string {
	var b strings.Builder
	f := e.Format
	for {
		i := strings.IndexByte(f, '{')
		j := strings.IndexByte(f[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(f)
			break
		}
		b.WriteString(f[:i])
		b.WriteString(strings.ReplaceAll(name(f[i+1:i+1+j]), "%", "%%"))
		f = f[i+2+j:]
	}
	msg := fmt.Sprintf(b.String(), e.Args...)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap is the wrapped error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }
