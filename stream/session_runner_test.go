package stream

import (
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/stream/engine"
)

func TestCheckSessionShards(t *testing.T) {
	if CheckSessionShards(1) != nil || CheckSessionShards(0) != nil {
		t.Fatal("one stream refused")
	}
	if err := CheckSessionShards(3); err == nil {
		t.Fatal("three shards accepted")
	}
}

// TestRunnerConfigValidateSessions: what RunnerConfig.Validate refuses
// with SessionGap, for callers that build the config without the flags.
func TestRunnerConfigValidateSessions(t *testing.T) {
	base := RunnerConfig{Sources: []string{"in"}, SessionGap: 5 * time.Minute}
	if err := base.Validate(); err != nil {
		t.Fatalf("a session config without a window: %v", err)
	}
	for _, c := range []struct {
		change func(*RunnerConfig)
		want   string
	}{
		{func(c *RunnerConfig) { c.Engine.Window = tidemark.WindowSpec{Size: 60_000_000} }, "SessionGap replaces Engine.Window.Size and Engine.Window.Slide"},
		{func(c *RunnerConfig) { c.Engine.Window.Slide = 1 }, "SessionGap replaces Engine.Window.Size and Engine.Window.Slide"},
		{func(c *RunnerConfig) { c.Engine.OutputMode = engine.Update }, "only Engine.OutputMode append"},
		{func(c *RunnerConfig) { c.SessionGap = -time.Second }, "session gap must be positive"},
		{func(c *RunnerConfig) { c.SessionGap = time.Nanosecond }, "whole microseconds"},
	} {
		cfg := base
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestStatusInfoSessions: the status page of a session stream names the
// gap, not a window.
func TestStatusInfoSessions(t *testing.T) {
	info := newStatus(RunnerConfig{Clock: time.Now, SessionGap: 30 * time.Minute}).info
	if info.SessionGap != "30m0s" || info.Window != "" {
		t.Fatalf("status info %+v", info)
	}
	info = newStatus(RunnerConfig{Clock: time.Now, Engine: engine.Config{Window: tidemark.WindowSpec{Size: 60_000_000}}}).info
	if info.SessionGap != "" || info.Window != "1m0s" {
		t.Fatalf("status info %+v", info)
	}
}
