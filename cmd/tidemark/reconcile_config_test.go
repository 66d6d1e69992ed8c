package main

import (
	"testing"
	"time"

	"tidemark/reconcile"
)

// TestReconcileConfigErrorsNameFlags: what reconcile.Config.Validate
// refuses (a tidemark.ConfigError naming fields) reads, from `tidemark
// reconcile`, with the flags' names, as before the package stopped naming
// flags.
func TestReconcileConfigErrorsNameFlags(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cfg  reconcile.Config
		want string
	}{
		{reconcile.Config{Since: -time.Hour}, "--since must not be negative, got -1h0m0s"},
		{reconcile.Config{Since: time.Hour, From: t0, To: t0.Add(time.Hour)}, "give --since or --from/--to, not both"},
		{reconcile.Config{To: t0}, "--from and --to go together"},
		{reconcile.Config{From: t0, To: t0}, "--to 2026-03-01T10:00:00Z is not after --from 2026-03-01T10:00:00Z"},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Fatalf("%q: the config was accepted", tc.want)
		}
		if got := flagError(err, reconcileFlags).Error(); got != tc.want {
			t.Errorf("got %q\nwant %q", got, tc.want)
		}
	}
}
