package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"tidemark/stream"
)

// The process's memory policy lives here, in main, and nowhere else: the
// Go GC's soft memory limit (runtime/debug.SetMemoryLimit) is one setting
// for the whole process, so no package sets it.
//
// The ceiling is the most the limit may ever be: GOMEMLIMIT when it is
// set (the runtime already applies it), else the container's memory
// (cgroup v2 memory.max, v1 memory.limit_in_bytes, the lowest on the
// process's cgroup path) less headroom for what the GC does not count
// (stacks, the binary, kernel buffers): a tenth, at least 32 MiB. Every
// command starts with the ceiling as its limit, so a heap in a 256 MiB pod
// is collected before the OOM killer's line rather than after.
//
// A stream's --memory-limit auto keeps the limit near what it holds live:
// memoryBase plus twice the open state's estimate (state_bytes), raised
// after each batch as the state grows, never above the ceiling. Without a
// limit the heap may grow to 1.7 times the live data before a collection
// (GOGC 70), and a per-user stream peaked 100-200 MiB higher.
const memoryBase = 320 << 20

// memoryRoot is where the cgroup files are read.
const memoryRoot = "/"

// memoryState is the process's ceiling, found once.
var memoryState struct {
	once    sync.Once
	ceiling int64  // 0: none
	from    string // where it came from, for --help and logs
}

// processCeiling returns the ceiling of this process (0 for none) and
// where it came from.
func processCeiling() (int64, string) {
	memoryState.once.Do(func() {
		memoryState.ceiling, memoryState.from = ceiling(os.Getenv("GOMEMLIMIT"), memoryRoot)
	})
	return memoryState.ceiling, memoryState.from
}

// ceiling computes the ceiling from GOMEMLIMIT's value and the cgroup
// files under root. A GOMEMLIMIT the runtime could not parse (it would
// not have started) or "off" is no ceiling.
func ceiling(gomemlimit, root string) (int64, string) {
	if gomemlimit != "" {
		if n, err := parseGoMemLimit(gomemlimit); err == nil && n > 0 && n != math.MaxInt64 {
			return n, "GOMEMLIMIT"
		}
		return 0, ""
	}
	m, file, err := cgroupMemoryMax(root)
	if err != nil || m <= 0 {
		return 0, ""
	}
	return m - max(m/10, min(32<<20, m/2)), file
}

// parseGoMemLimit reads GOMEMLIMIT as the runtime does: bytes with an
// optional B, KiB, MiB, GiB or TiB suffix, or "off".
func parseGoMemLimit(s string) (int64, error) {
	if s == "off" {
		return math.MaxInt64, nil
	}
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, unit = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("GOMEMLIMIT %q: not a size", s)
	}
	return n * unit, nil
}

// cgroupMemoryMax returns the lowest memory limit on the process's cgroup
// path under root (its cgroup and every parent), and the file that set it;
// 0 when none is set or there are no cgroup files. It reads
// root/proc/self/cgroup for the path: a v2 line "0::/a/b" limits by
// root/sys/fs/cgroup/a/b/memory.max ("max" is none), a v1 line with the
// memory controller "N:memory:/a/b" by
// root/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes (a value near 2^63,
// the kernel's "unlimited", is none). Inside a container's cgroup
// namespace the path is "/", its own limit.
func cgroupMemoryMax(root string) (int64, string, error) {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	var best int64
	var bestFile string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, rest, ok1 := strings.Cut(sc.Text(), ":")
		ctrls, cg, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(cg, "/") {
			continue
		}
		var dir, file string
		switch {
		case id == "0" && ctrls == "":
			dir, file = "sys/fs/cgroup", "memory.max"
		case hasController(ctrls, "memory"):
			dir, file = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for p := path.Clean(cg); ; p = path.Dir(p) {
			name := filepath.Join(root, dir, p, file)
			if n, ok := readLimit(name); ok && (best == 0 || n < best) {
				best, bestFile = n, strings.TrimPrefix(name, filepath.Clean(root))
			}
			if p == "/" {
				break
			}
		}
	}
	return best, bestFile, sc.Err()
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads one cgroup limit file; false when it is missing, holds
// "max" or the v1 "unlimited" (at least 2^62), or is not a number.
func readLimit(name string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}

// startMemory sets the process's limit to its ceiling, first thing in
// every command. Without a ceiling it sets nothing.
func startMemory() {
	if c, from := processCeiling(); c > 0 && from != "GOMEMLIMIT" {
		debug.SetMemoryLimit(c)
	}
}

// parseMemoryLimit reads --memory-limit: "auto", "off", or a size in bytes
// with an optional KiB, MiB or GiB suffix. It returns 0 for auto, -1 for
// off, else the size.
func parseMemoryLimit(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	num, unit := s, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			num, unit = strings.TrimSuffix(s, suffix), u
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("--memory-limit %q: want auto, off or a size such as 512MiB", s)
	}
	return n * unit, nil
}

// streamMemory applies a stream's --memory-limit (parseMemoryLimit's
// value) and returns the OnProgress wrapper that moves the auto limit
// with the state: a fixed size is set once (the user's choice, above the
// ceiling too); off gives the process Go's default (or GOMEMLIMIT) back;
// auto starts at min(memoryBase, ceiling).
func streamMemory(limit int64, next func(stream.Progress)) func(stream.Progress) {
	ceil, from := processCeiling()
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
		return next
	case limit < 0:
		if from != "GOMEMLIMIT" {
			debug.SetMemoryLimit(math.MaxInt64)
		}
		return next
	case from == "GOMEMLIMIT": // auto: GOMEMLIMIT wins
		return next
	}
	debug.SetMemoryLimit(autoLimit(0, ceil))
	return func(p stream.Progress) {
		debug.SetMemoryLimit(autoLimit(p.StateBytes, ceil))
		if next != nil {
			next(p)
		}
	}
}

// autoLimit is --memory-limit auto for a stream holding stateBytes of
// open state under ceiling (0: none).
func autoLimit(stateBytes, ceiling int64) int64 {
	l := memoryBase + 2*max(stateBytes, 0)
	if ceiling > 0 {
		l = min(l, ceiling)
	}
	return l
}
