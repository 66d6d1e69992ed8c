package engine

import (
	"fmt"
	"time"

	"tidemark"
)

// LateRule decides when the watermark drops a row from the streaming result.
type LateRule int

const (
	// LateWindow (default) drops a row from each of its windows that has
	// already closed (window_end <= W), as Spark and Flink do for windowed
	// aggregations; with sliding windows the row still counts in the open ones.
	LateWindow LateRule = iota
	// LateEvent drops a row from all its windows iff event_time < W (strict),
	// the rule the seed tutorials teach.
	LateEvent
)

// String returns the flag spelling of the rule.
func (r LateRule) String() string {
	switch r {
	case LateWindow:
		return "window"
	case LateEvent:
		return "event"
	}
	return fmt.Sprintf("LateRule(%d)", int(r))
}

// ParseLateRule parses the --late-rule flag: "window" or "event".
func ParseLateRule(s string) (LateRule, error) {
	switch s {
	case "window":
		return LateWindow, nil
	case "event":
		return LateEvent, nil
	}
	return 0, fmt.Errorf("parse late rule %q: want window or event", s)
}

// OutputMode decides when windows are emitted.
type OutputMode int

const (
	// Append (default) emits each window once, final, when it closes.
	Append OutputMode = iota
	// Update also emits every window whose aggregate changed in a batch
	// (Final=false) before emitting it final when it closes.
	Update
)

// String returns the flag spelling of the mode.
func (m OutputMode) String() string {
	switch m {
	case Append:
		return "append"
	case Update:
		return "update"
	}
	return fmt.Sprintf("OutputMode(%d)", int(m))
}

// ParseOutputMode parses the --output-mode flag: "append" or "update".
func ParseOutputMode(s string) (OutputMode, error) {
	switch s {
	case "append":
		return Append, nil
	case "update":
		return Update, nil
	}
	return 0, fmt.Errorf("parse output mode %q: want append or update", s)
}

// Policy combines the per-source watermarks into the global one.
type Policy int

const (
	// PolicyMin (default): W is the minimum over active sources, so the
	// slowest source holds the watermark back and drops nothing of its own.
	PolicyMin Policy = iota
	// PolicyMax: W is the maximum, so the fastest source drives it and rows of
	// slower sources may be dropped.
	PolicyMax
)

// String returns the flag spelling of the policy.
func (p Policy) String() string {
	switch p {
	case PolicyMin:
		return "min"
	case PolicyMax:
		return "max"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses the --watermark-policy flag: "min" or "max".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "min":
		return PolicyMin, nil
	case "max":
		return PolicyMax, nil
	}
	return 0, fmt.Errorf("parse watermark policy %q: want min or max", s)
}

// Config configures an Engine. The zero value of every field but Window
// means the documented default.
type Config struct {
	Window tidemark.WindowSpec // required: Size > 0, 0 <= Slide <= Size
	// Lateness is subtracted from each source's max event time to give its
	// watermark; >= 0, whole microseconds (a finer part is dropped).
	Lateness time.Duration
	// SourceLateness gives a source (by its --source value) a budget of
	// its own instead of Lateness.
	SourceLateness map[string]time.Duration
	LateRule       LateRule
	OutputMode     OutputMode
	Policy         Policy
	IdleTimeout    time.Duration // a source without lines for this long (by Process's now) is idle; 0 = off
	// Aggs are the --agg aggregates: every open pair then holds a
	// tidemark.AggState fed its records' Fields, emitted in
	// Result.State and carried by snapshots, changelogs and the Store.
	// The window engine only; the session engine refuses them.
	Aggs tidemark.AggList

	// The budgets in µs, as the engine computes watermarks; set by validate.
	latenessUS       int64
	sourceLatenessUS map[string]int64
}

// validate checks cfg and returns it with the slide made explicit.
func (cfg Config) validate() (Config, error) {
	if cfg.Window.Size <= 0 {
		return cfg, fmt.Errorf("stream config: window size must be positive, got %dµs", cfg.Window.Size)
	}
	if cfg.Window.Slide < 0 || cfg.Window.Slide > cfg.Window.Size {
		return cfg, fmt.Errorf("stream config: slide %dµs must be in (0, window %dµs]", cfg.Window.Slide, cfg.Window.Size)
	}
	cfg.Window = cfg.Window.Normalized()
	if cfg.Lateness < 0 {
		return cfg, fmt.Errorf("stream config: lateness must not be negative, got %s", cfg.Lateness)
	}
	cfg.latenessUS = cfg.Lateness.Microseconds()
	cfg.sourceLatenessUS = make(map[string]int64, len(cfg.SourceLateness))
	for name, l := range cfg.SourceLateness {
		if l < 0 {
			return cfg, fmt.Errorf("stream config: lateness of source %s must not be negative, got %s", name, l)
		}
		cfg.sourceLatenessUS[name] = l.Microseconds()
	}
	if cfg.LateRule != LateWindow && cfg.LateRule != LateEvent {
		return cfg, fmt.Errorf("stream config: unknown %v", cfg.LateRule)
	}
	if cfg.OutputMode != Append && cfg.OutputMode != Update {
		return cfg, fmt.Errorf("stream config: unknown %v", cfg.OutputMode)
	}
	if cfg.Policy != PolicyMin && cfg.Policy != PolicyMax {
		return cfg, fmt.Errorf("stream config: unknown %v", cfg.Policy)
	}
	if cfg.IdleTimeout < 0 {
		return cfg, fmt.Errorf("stream config: idle timeout must not be negative, got %s", cfg.IdleTimeout)
	}
	return cfg, nil
}

// lateness is the budget of the named source, µs.
func (cfg Config) lateness(source string) int64 {
	if l, ok := cfg.sourceLatenessUS[source]; ok {
		return l
	}
	return cfg.latenessUS
}

// LatenessOf is the lateness budget of the named source: its
// SourceLateness, or Lateness.
func (cfg Config) LatenessOf(source string) time.Duration {
	if l, ok := cfg.SourceLateness[source]; ok {
		return l
	}
	return cfg.Lateness
}
