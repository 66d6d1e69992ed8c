package stream

import (
	"context"
	"log/slog"
	"net"
	"time"
)

// warnExposed logs a warning when the metrics (and status page) listener
// may accept connections from other hosts. Such an address is allowed — a
// Prometheus server elsewhere must reach it — but the page shows source
// names, file paths and lake locations, so it should be a decision, and the
// log says where it was made.
func warnExposed(ctx context.Context, log *slog.Logger, addr string) {
	if exposed, host := exposedAddr(ctx, addr); exposed {
		log.Warn("--metrics-addr listens beyond loopback: other hosts can read the metrics; use 127.0.0.1 to keep them local",
			"metrics_addr", addr, "host", host)
	}
}

// exposedAddr reports whether a listen address is not loopback-only: an
// empty or unspecified host (all interfaces), an address of another
// interface, or a name resolving to one. A name that does not resolve is
// not reported: the listen fails on it anyway.
func exposedAddr(ctx context.Context, addr string) (bool, string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, "" // the listen reports the bad address
	}
	if host == "" {
		return true, "all interfaces"
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return true, "all interfaces"
		}
		return !ip.IsLoopback(), host
	}
	if host == "localhost" {
		return false, host
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, ""
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return true, host
		}
	}
	return false, host
}
