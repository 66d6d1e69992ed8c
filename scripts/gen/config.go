package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// Config describes one generated data set. Zero fields take the defaults
// documented on the flags (see withDefaults), except the fractions, where 0
// means none.
type Config struct {
	Events  int      // lines to write, bad lines included
	Seed    uint64   // random seed
	Out     string   // output directory
	Files   int      // files per source (default 8)
	Keys    int      // distinct pages (default 1000)
	Sources []string // source names; empty = one source written directly into Out
	Format  string   // "ndjson" (default) or "csv"
	Start   time.Time
	Rate    float64 // events per second of event time (default 1000)

	LateFrac      float64 // hours-late mobile events
	FutureFrac    float64 // event time in 2099
	BadFrac       float64 // bad lines, split evenly over badKinds
	NullValueFrac float64 // valid events with a null or absent value
}

func (c Config) withDefaults() (Config, error) {
	if c.Files <= 0 {
		c.Files = 8
	}
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if c.Format == "" {
		c.Format = "ndjson"
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	switch {
	case c.Out == "":
		return c, fmt.Errorf("no output directory (-out)")
	case c.Events < 0:
		return c, fmt.Errorf("-events %d: want >= 0", c.Events)
	case c.Format != "ndjson" && c.Format != "csv":
		return c, fmt.Errorf("-format %q: want ndjson or csv", c.Format)
	case c.LateFrac < 0 || c.FutureFrac < 0 || c.BadFrac < 0 || c.NullValueFrac < 0 ||
		c.LateFrac+c.FutureFrac+c.BadFrac > 1:
		return c, fmt.Errorf("fractions must be >= 0 and late+future+bad <= 1")
	}
	for _, s := range c.Sources {
		if s == "" || strings.ContainsAny(s, `/\`) || s == "." || s == ".." {
			return c, fmt.Errorf("-sources: bad source name %q", s)
		}
	}
	return c, nil
}

// dirs returns one output directory per source.
func (c Config) dirs() []string {
	if len(c.Sources) == 0 {
		return []string{c.Out}
	}
	d := make([]string, len(c.Sources))
	for i, s := range c.Sources {
		d[i] = filepath.Join(c.Out, s)
	}
	return d
}

// Summary counts what was written. Quarantine counts use tidemark's reason
// names, so a test can compare them with the quarantine table directly
// (future_time assumes tidemark's default --max-future of 1h).
type Summary struct {
	Lines      int            `json:"lines"`
	Valid      int            `json:"valid"`       // lines tidemark should accept as events
	LateMobile int            `json:"late_mobile"` // valid events with an hours-long lag
	NullValue  int            `json:"null_value"`  // valid events without a value
	Bad        map[string]int `json:"quarantine"`  // expected quarantine rows by reason
	Files      []string       `json:"files"`
	Bytes      int64          `json:"bytes"`
	FirstEvent string         `json:"first_event_time"`
	LastEvent  string         `json:"last_event_time"` // of valid, non-future events
	Seconds    float64        `json:"seconds"`
}

func (s *Summary) write(w io.Writer) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
