package main

import (
	"strconv"
	"strings"
	"testing"
)

// The seed tutorials' walk-throughs (SPEC §2, "Acceptance"), run through the
// real binary one event per batch, under both late rules, with and without
// --drain.
func TestSeedWalkThroughs(t *testing.T) {
	win := func(start, end string, count int, rest string) string {
		return `{"window_start":"2026-01-01T` + start + `Z","window_end":"2026-01-01T` + end + `Z","page":"/a","count":` + strconv.Itoa(count) + rest + `,"final":true}`
	}
	v := func(n int) string { return `,"sum":` + strconv.Itoa(n) + `,"min":1,"max":1` }
	tests := []struct {
		name       string
		seed       string
		flags      []string
		want       []string
		accounting string
	}{
		{
			name:  "seed1 event rule without drain: [10:00,10:10) is still open",
			seed:  "seed1",
			flags: []string{"--window", "10m", "--lateness", "5m", "--late-rule", "event", "--value", "value"},
			want:  nil, accounting: "lines read 6 = ok 5 + late 1 + quarantined 0",
		},
		{
			name:  "seed1 event rule with drain: 10:06 dropped, count 3",
			seed:  "seed1",
			flags: []string{"--window", "10m", "--lateness", "5m", "--late-rule", "event", "--value", "value", "--drain"},
			want: []string{
				win("10:00:00", "10:10:00", 3, v(3)),
				win("10:10:00", "10:20:00", 2, v(2)),
			},
			accounting: "lines read 6 = ok 5 + late 1 + quarantined 0",
		},
		{
			name:  "seed1 window rule with drain: 10:06 accepted, count 4",
			seed:  "seed1",
			flags: []string{"--window", "10m", "--lateness", "5m", "--late-rule", "window", "--value", "value", "--drain"},
			want: []string{
				win("10:00:00", "10:10:00", 4, v(4)),
				win("10:10:00", "10:20:00", 2, v(2)),
			},
			accounting: "lines read 6 = ok 6 + late 0 + quarantined 0",
		},
		{
			name:  "seed2 event rule without drain: 13, 22, 25 dropped; [30,40) open",
			seed:  "seed2",
			flags: []string{"--window", "10s", "--lateness", "5s", "--late-rule", "event"},
			want: []string{
				win("10:00:10", "10:00:20", 1, ""),
				win("10:00:20", "10:00:30", 3, ""),
			},
			accounting: "lines read 10 = ok 7 + late 3 + quarantined 0",
		},
		{
			name:  "seed2 event rule with drain: [30,40) emitted with 3",
			seed:  "seed2",
			flags: []string{"--window", "10s", "--lateness", "5s", "--late-rule", "event", "--drain"},
			want: []string{
				win("10:00:10", "10:00:20", 1, ""),
				win("10:00:20", "10:00:30", 3, ""),
				win("10:00:30", "10:00:40", 3, ""),
			},
			accounting: "lines read 10 = ok 7 + late 3 + quarantined 0",
		},
		{
			name:  "seed2 window rule with drain: only 13 dropped ([10,20) closed); 22 and 25 join [20,30)",
			seed:  "seed2",
			flags: []string{"--window", "10s", "--lateness", "5s", "--late-rule", "window", "--drain"},
			want: []string{
				win("10:00:10", "10:00:20", 1, ""),
				win("10:00:20", "10:00:30", 5, ""),
				win("10:00:30", "10:00:40", 3, ""),
			},
			accounting: "lines read 10 = ok 9 + late 1 + quarantined 0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"stream", "--source", "testdata/seeds/" + tc.seed, "--key", "page",
				"--max-batch-rows", "1", "--once", "--print", "--lake", t.TempDir()}, tc.flags...)
			stdout, stderr, code := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			got := lines(stdout)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("windows printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if !strings.Contains(stderr, tc.accounting) {
				t.Errorf("stderr lacks %q:\n%s", tc.accounting, stderr)
			}
		})
	}
}
