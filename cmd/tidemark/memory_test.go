package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryMax reads the fixture trees under testdata/cgroup, laid
// out as / is: proc/self/cgroup and sys/fs/cgroup.
func TestCgroupMemoryMax(t *testing.T) {
	for _, c := range []struct {
		root string
		want int64
		file string
	}{
		// A container's cgroup namespace: v2, its own root.
		{"v2-pod", 256 << 20, "/sys/fs/cgroup/memory.max"},
		// v2 with "max" all the way up: no limit.
		{"v2-unlimited", 0, ""},
		// v2, nested: the parent's limit is lower than the leaf's.
		{"v2-nested", 512 << 20, "/sys/fs/cgroup/app/memory.max"},
		// v1 (hybrid: a v2 line too, without a limit).
		{"v1", 300 << 20, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"},
		// v1's "unlimited" is a page-rounded 2^63.
		{"v1-unlimited", 0, ""},
		// No cgroup files at all (another OS, a chroot).
		{"none", 0, ""},
	} {
		got, file, err := cgroupMemoryMax(filepath.Join("testdata", "cgroup", c.root))
		if err != nil {
			t.Errorf("%s: %v", c.root, err)
			continue
		}
		if got != c.want || file != c.file {
			t.Errorf("%s: got %d from %q, want %d from %q", c.root, got, file, c.want, c.file)
		}
	}
}

func TestCeiling(t *testing.T) {
	pod := filepath.Join("testdata", "cgroup", "v2-pod")
	for _, c := range []struct {
		env, root string
		want      int64
		from      string
	}{
		// 256 MiB less 32 MiB (more than a tenth).
		{"", pod, 224 << 20, "/sys/fs/cgroup/memory.max"},
		// 512 MiB (v2-nested's lowest) less 51.2 MiB.
		{"", filepath.Join("testdata", "cgroup", "v2-nested"), 512<<20 - (512<<20)/10, "/sys/fs/cgroup/app/memory.max"},
		// GOMEMLIMIT wins over the cgroup, as it is.
		{"100MiB", pod, 100 << 20, "GOMEMLIMIT"},
		{"1073741824", pod, 1 << 30, "GOMEMLIMIT"},
		{"off", pod, 0, ""},
		{"", filepath.Join("testdata", "cgroup", "none"), 0, ""},
	} {
		got, from := ceiling(c.env, c.root)
		if got != c.want || from != c.from {
			t.Errorf("ceiling(%q, %s): got %d from %q, want %d from %q", c.env, c.root, got, from, c.want, c.from)
		}
	}
}

func TestAutoLimit(t *testing.T) {
	for _, c := range []struct{ state, ceiling, want int64 }{
		{0, 0, memoryBase},
		{100 << 20, 0, memoryBase + 200<<20},
		{0, 224 << 20, 224 << 20}, // never starts above the ceiling
		{1 << 30, 2 << 30, 2 << 30},
		{10 << 20, 1 << 30, memoryBase + 20<<20},
	} {
		if got := autoLimit(c.state, c.ceiling); got != c.want {
			t.Errorf("autoLimit(%d, %d) = %d, want %d", c.state, c.ceiling, got, c.want)
		}
	}
}

func TestParseMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"auto", 0, true}, {"", 0, true}, {"off", -1, true}, {"512MiB", 512 << 20, true},
		{"2GiB", 2 << 30, true}, {"1000", 1000, true}, {"0", 0, false}, {"-5MiB", 0, false},
		{"lots", 0, false}, {"9999999999GiB", 0, false},
	} {
		got, err := parseMemoryLimit(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
	}{{"off", math.MaxInt64}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}, {"4096B", 4096}, {"12345", 12345}} {
		if got, err := parseGoMemLimit(c.in); err != nil || got != c.want {
			t.Errorf("parseGoMemLimit(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

// FuzzCgroupMemoryMax feeds arbitrary /proc/self/cgroup and limit files:
// never a panic, never a negative limit.
func FuzzCgroupMemoryMax(f *testing.F) {
	f.Add("0::/\n", "268435456\n")
	f.Add("4:memory:/docker/abc\n0::/\n", "max\n")
	f.Add("0::/../..\n", "-1")
	f.Fuzz(func(t *testing.T, cgroup, limit string) {
		root := t.TempDir()
		for _, p := range []string{"proc/self", "sys/fs/cgroup/memory"} {
			if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(root, "proc/self/cgroup"), []byte(cgroup), 0o644)
		os.WriteFile(filepath.Join(root, "sys/fs/cgroup/memory.max"), []byte(limit), 0o644)
		os.WriteFile(filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"), []byte(limit), 0o644)
		n, _, _ := cgroupMemoryMax(root)
		if n < 0 {
			t.Fatalf("got %d", n)
		}
	})
}
