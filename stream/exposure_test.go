package stream

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestExposedAddr(t *testing.T) {
	for _, c := range []struct {
		addr    string
		exposed bool
	}{
		{"127.0.0.1:9464", false},
		{"127.1.2.3:9464", false},
		{"[::1]:9464", false},
		{"localhost:9464", false},
		{":9464", true},
		{"0.0.0.0:9464", true},
		{"[::]:9464", true},
		{"10.0.0.7:9464", true},
		{"[2001:db8::1]:9464", true},
		{"no-port", false}, // the listen reports it
	} {
		if got, _ := exposedAddr(context.Background(), c.addr); got != c.exposed {
			t.Errorf("exposedAddr(%q) = %v, want %v", c.addr, got, c.exposed)
		}
	}
}

// TestMetricsAddrWarning: a stream serving metrics on all interfaces says
// so at start; on loopback it does not.
func TestMetricsAddrWarning(t *testing.T) {
	for _, c := range []struct {
		addr string
		warn bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		var logs bytes.Buffer
		cfg := runnerConfig(t, t.TempDir(), t.TempDir())
		cfg.Once, cfg.MetricsAddr = true, c.addr
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "beyond loopback"); got != c.warn {
			t.Errorf("--metrics-addr %s: warned %v, want %v:\n%s", c.addr, got, c.warn, logs.String())
		}
	}
}
