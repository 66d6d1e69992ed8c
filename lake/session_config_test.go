package lake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tidemark"
	"tidemark/lake/store"
)

// TestOpenRemembersSessionGap: a lake created for sessions records the gap
// in every table's configuration and adopts it, and a window setup on it,
// another gap, or a session setup on a window lake is a mismatch naming
// both.
func TestOpenRemembersSessionGap(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: t0}
	gap := 5 * time.Minute
	sessions := func() Config {
		c := testConfig(clock)
		c.Window, c.SessionGap = tidemark.WindowSpec{}, gap
		return c
	}
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, st, sessions())
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Config(); c.SessionGap != gap || c.Window != (tidemark.WindowSpec{Size: gap.Microseconds(), Slide: gap.Microseconds()}) {
		t.Fatalf("session lake opened with %+v", c)
	}
	for _, name := range tableNames {
		snap, err := l.tables[name].dt.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Metadata.Configuration[confSessionGap]; got != "300000000" {
			t.Errorf("table %s records %s=%q", name, confSessionGap, got)
		}
	}
	if l, err = Open(ctx, st, Config{}); err != nil || l.Config().SessionGap != gap {
		t.Fatalf("adopting the session lake: %v, %+v", err, l)
	}
	if _, err := Open(ctx, st, sessions()); err != nil {
		t.Fatalf("the same session setup: %v", err)
	}
	other := sessions()
	other.SessionGap *= 2
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{testConfig(clock), "created with --key page --key region --value v --session-gap 5m0s, this run asks for --key page --key region --value v --window 10m0s"},
		{other, "this run asks for --key page --key region --value v --session-gap 10m0s"},
	} {
		if _, err := Open(ctx, st, c.cfg); !errors.Is(err, ErrConfigMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want a mismatch with %q", err, c.want)
		}
	}
	// A window lake refuses a session setup, even with the gap its window is.
	wst, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, wst, testConfig(clock)); err != nil {
		t.Fatal(err)
	}
	same := sessions()
	same.SessionGap = 10 * time.Minute
	if _, err := Open(ctx, wst, same); !errors.Is(err, ErrConfigMismatch) {
		t.Errorf("session setup on a window lake: got %v, want a mismatch", err)
	}
}
